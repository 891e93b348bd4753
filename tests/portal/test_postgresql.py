"""portal.postgresql: Django's backend whose health check asks the server only when the
socket of an idle connection has something to read (real PostgreSQL, real terminations)."""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from tests.fixtures.portal import _test_database_url, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def observer() -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own, to watch and end the portal's from the server's side."""
    with psycopg.connect(_test_database_url(), autocommit=True) as other:
        yield other


def portal_connection() -> Any:
    """The portal's connection, used once and at a request's start again (health unchecked)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last thing asked'")
    connection.health_check_done = False
    return connection.connection


def last_query_of(observer: psycopg.Connection[Any], pid: int) -> str:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row[0] if row else ""


def test_a_quiet_idle_connection_is_used_without_a_round_trip(
    observer: psycopg.Connection[Any],
) -> None:
    assert connection.vendor == "postgresql" and connection.health_check_enabled
    before = portal_connection()
    pid = before.info.backend_pid
    connection.close_if_health_check_failed()
    assert connection.connection is before and connection.health_check_done
    assert last_query_of(observer, pid) == "SELECT 'the last thing asked'"  # no SELECT 1


def test_a_connection_the_server_ended_is_replaced_before_use(
    observer: psycopg.Connection[Any],
) -> None:
    before = portal_connection()
    observer.execute("SELECT pg_terminate_backend(%s)", [before.info.backend_pid])
    poll = select.poll()
    poll.register(before.fileno(), select.POLLIN)
    wait_until(lambda: poll.poll(0), timeout=30)  # the server's goodbye has arrived
    connection.close_if_health_check_failed()
    assert connection.connection is None  # closed, so the next query opens a new one
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert connection.connection is not before
