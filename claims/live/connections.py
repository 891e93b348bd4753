"""The database connections of a web process with many threads.

A web process has a thread for each request it lets wait (LIVE_WAITERS_MAX) and some more for
the others: more than PostgreSQL takes connections. So the threads borrow from a pool of a few
(DB_POOL_SIZE, portal/database_settings.py) for each request, and a waiting request gives its
connection back while it waits (claims.live.changes).
"""

from __future__ import annotations

from django.db import connections


def release() -> None:
    """Give back (or close) this thread's database connections: the next query borrows (or
    opens) one again. Never one inside a transaction, which would be lost."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()
