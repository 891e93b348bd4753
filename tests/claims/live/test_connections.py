"""Of a web process's many threads, only a few keep a database connection between requests."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from claims.live import connections


@pytest.fixture(autouse=True)
def no_keepers_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "_keepers", set())


def in_a_thread(work: Callable[[], object]) -> object:
    """work's result, run in a thread of its own (so on a connection of its own)."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    return result[0]


@override_settings(CONN_KEPT_PER_PROCESS=2)
def test_it_lets_the_first_threads_keep_theirs() -> None:
    kept = [connections.keeps_connection(thread) for thread in (11, 12, 13, 11, 12, 14)]
    assert kept == [True, True, False, True, True, False]


@pytest.mark.django_db(transaction=True)
@override_settings(CONN_KEPT_PER_PROCESS=0)
def test_a_request_ends_without_a_connection_on_a_thread_that_keeps_none() -> None:
    def request() -> object:
        User.objects.exists()  # a connection, as a request's own queries open one
        assert Client().get("/accounts/login/").status_code == 200
        return connection.connection

    assert in_a_thread(request) is None


@pytest.mark.django_db(transaction=True)
@override_settings(CONN_KEPT_PER_PROCESS=1)
def test_a_thread_that_keeps_one_keeps_it_for_the_next_request() -> None:
    def two_requests() -> object:
        User.objects.exists()
        first = connection.connection
        Client().get("/accounts/login/")
        return first is not None and connection.connection is first

    assert in_a_thread(two_requests) is True
