"""A web process's many threads borrow database connections from a pool of a few per process
(DB_POOL_SIZE) for each request, and give them back at its end (real PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import RequestFactory

pytestmark = pytest.mark.django_db(transaction=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), pg_sleep(0.05)")
        return cursor.fetchone()[0]


def serve(path: str) -> int:
    """A request served as gunicorn serves it (Django's test Client keeps the connection)."""
    statuses: list[str] = []
    body = WSGIHandler()(RequestFactory().get(path).environ, lambda s, h: statuses.append(s))
    body.close()  # the end of the request: Django's request_finished
    return int(statuses[0].split()[0])


def in_a_thread(work: Callable[[], object]) -> object:
    """work's result, run in a thread of its own (as gunicorn's threads), which ends."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    thread.join(timeout=60)
    return result[0]


def test_a_request_gives_its_connection_back() -> None:
    def request() -> object:
        backend_pid()  # a connection, as a request's own queries borrow one
        assert serve("/accounts/login/") == 200
        return connection.connection

    assert in_a_thread(request) is None


def test_threads_one_after_another_share_the_pools_connections() -> None:
    """Not a new server session for each thread that serves a request."""

    def request() -> object:
        pid = backend_pid()
        serve("/accounts/login/")
        return pid

    pids = {in_a_thread(request) for _ in range(40)}
    assert len(pids) <= connection.settings_dict["OPTIONS"]["pool"]["max_size"]


def test_threads_at_once_never_hold_more_than_the_pool() -> None:
    """More threads than the pool has connections all get their query answered, in turn."""
    size = connection.settings_dict["OPTIONS"]["pool"]["max_size"]

    def query() -> int:
        try:
            return backend_pid()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=size * 2) as threads:
        pids = list(threads.map(lambda _: query(), range(size * 4)))
    assert len(pids) == size * 4 and len(set(pids)) <= size
