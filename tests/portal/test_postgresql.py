"""portal.postgresql: a kept connection is checked before use with a round trip only when the
socket of an idle connection has something to read; with the pool (the default) and without
(real PostgreSQL, real terminations)."""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from portal.postgresql import health
from portal.postgresql.base import DatabaseWrapper
from tests.fixtures.portal import _test_database_url, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def observer() -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own, to watch and end the portal's from the server's side."""
    with psycopg.connect(_test_database_url(), autocommit=True) as other:
        yield other


@pytest.fixture
def unpooled() -> Iterator[DatabaseWrapper]:
    """The backend as it runs with DB_POOL_SIZE=0: each thread keeps its own connection."""
    options = {k: v for k, v in connection.settings_dict["OPTIONS"].items() if k != "pool"}
    wrapper = DatabaseWrapper(
        {
            **connection.settings_dict,
            "OPTIONS": options,
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        },
        alias="unpooled",
    )
    yield wrapper
    wrapper.close()


def used_once(wrapper: Any) -> Any:
    """The wrapper's connection, used once and at a request's start again (health unchecked)."""
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT 'the last thing asked'")
    wrapper.health_check_done = False
    return wrapper.connection


def last_query_of(observer: psycopg.Connection[Any], pid: int) -> str:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row[0] if row else ""


def goodbye_arrived(raw: Any) -> bool:
    poll = select.poll()
    poll.register(raw.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def test_a_quiet_idle_connection_is_used_without_a_round_trip(
    observer: psycopg.Connection[Any], unpooled: DatabaseWrapper
) -> None:
    before = used_once(unpooled)
    assert unpooled.health_check_enabled
    unpooled.close_if_health_check_failed()
    assert unpooled.connection is before and unpooled.health_check_done
    assert last_query_of(observer, before.info.backend_pid) == "SELECT 'the last thing asked'"


def test_a_connection_the_server_ended_is_replaced_before_use(
    observer: psycopg.Connection[Any], unpooled: DatabaseWrapper
) -> None:
    before = used_once(unpooled)
    observer.execute("SELECT pg_terminate_backend(%s)", [before.info.backend_pid])
    wait_until(lambda: goodbye_arrived(before), timeout=30)
    unpooled.close_if_health_check_failed()
    assert unpooled.connection is None  # closed, so the next query opens a new one
    with unpooled.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert unpooled.connection is not before


def test_the_pools_check_asks_nothing_of_a_quiet_connection(
    observer: psycopg.Connection[Any],
) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last thing asked'")
    pid = connection.connection.info.backend_pid
    connection.close()  # back to the pool
    lent_again = []
    for _ in range(connection.settings_dict["OPTIONS"]["pool"]["max_size"] + 2):
        connection.ensure_connection()  # borrowed, and checked as the pool lends it
        lent_again.append(connection.connection.info.backend_pid)
        connection.close()
        if lent_again[-1] == pid:
            break
    assert lent_again[-1] == pid
    assert last_query_of(observer, pid) == "SELECT 'the last thing asked'"  # no empty query


def test_a_connection_the_server_ended_fails_the_pools_check(
    observer: psycopg.Connection[Any],
) -> None:
    with psycopg.connect(_test_database_url(), autocommit=True) as raw:
        health.check(raw)
        observer.execute("SELECT pg_terminate_backend(%s)", [raw.info.backend_pid])
        wait_until(lambda: goodbye_arrived(raw), timeout=30)
        with pytest.raises(psycopg.OperationalError):
            health.check(raw)


def test_the_pool_lends_no_connection_the_server_ended(observer: psycopg.Connection[Any]) -> None:
    """A restarted database costs the portal no failed query: every connection in the pool
    ended by the server, the next borrowers each get a sound one. (Only this process's pool's:
    a Celery worker of the suite may use the same database.)"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    connection.close()  # back to the pool
    pool = connection.pool
    idle = [pool.getconn() for _ in range(pool.get_stats()["pool_available"])]
    pids = [raw.info.backend_pid for raw in idle]
    for raw in idle:
        pool.putconn(raw)
    assert pids
    observer.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
    wait_until(
        lambda: (
            not observer.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
            ).fetchall()
        ),
        timeout=30,
    )
    for _ in range(connection.settings_dict["OPTIONS"]["pool"]["max_size"] + 2):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
        connection.close()
