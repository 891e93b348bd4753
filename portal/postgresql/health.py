"""Whether a kept PostgreSQL connection is sound, without a round trip when it can tell.

A connection the server has ended (a restart, pg_terminate_backend, an idle timeout) has
something to read while idle: the server's goodbye, or the end of the stream. So an idle
connection whose socket is quiet is a live one; only the others are asked (an empty query).
No Django here: the settings hand `check` to the connection pool.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import pq
from psycopg_pool import ConnectionPool


def idle_and_quiet(connection: Any) -> bool:
    if connection.closed or connection.broken:
        return False
    if connection.info.transaction_status != pq.TransactionStatus.IDLE:
        return False
    poll = select.poll()
    poll.register(connection.fileno(), select.POLLIN | select.POLLPRI)
    return not poll.poll(0)


def check(connection: Any) -> None:
    """The pool's check before it lends a connection: raises if the connection is not sound
    (the pool then drops it and lends another)."""
    if not idle_and_quiet(connection):
        ConnectionPool.check_connection(connection)
