"""The tests' own flush (tests/fixtures/portal.py) outlasts a deadlock with a session that
still writes, as a task of the real Celery worker may after a test has ended (real
PostgreSQL, a real deadlock)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from tests.fixtures import portal as portal_fixtures
from tests.fixtures.portal import _test_database_url, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_tables() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE flush_first (id int); CREATE TABLE flush_second (id int)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE flush_first; DROP TABLE flush_second")


def test_the_flush_is_tried_again_when_it_ends_in_a_deadlock(
    two_tables: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[int] = []
    flush = portal_fixtures._execute_sql_flush
    monkeypatch.setattr(
        portal_fixtures, "_execute_sql_flush", lambda *args: tries.append(1) or flush(*args)
    )
    outcome: list[object] = []

    def flush_both() -> None:
        try:
            connection.ops.execute_sql_flush(["TRUNCATE flush_first, flush_second"])
            outcome.append("flushed")
        except Exception as error:
            outcome.append(error)
        finally:
            connection.close()

    with (
        psycopg.connect(_test_database_url(), autocommit=True) as observer,
        psycopg.connect(_test_database_url()) as writer,
    ):
        writer.execute("SET deadlock_timeout = '20s'")  # the flush's side finds the deadlock
        writer.execute("LOCK TABLE flush_second IN ROW EXCLUSIVE MODE")  # a write under way
        flusher = threading.Thread(target=flush_both)
        flusher.start()
        wait_until(  # the flush waits for the writer
            lambda: observer.execute(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'TRUNCATE flush_first%'"
                " AND wait_event_type = 'Lock'"
            ).fetchone(),
            timeout=30,
        )
        # The writer now wants what the flush holds: PostgreSQL ends the flush's transaction.
        writer.execute("LOCK TABLE flush_first IN ROW EXCLUSIVE MODE")
        writer.commit()
        flusher.join(timeout=60)
    assert outcome == ["flushed"] and len(tries) == 2
