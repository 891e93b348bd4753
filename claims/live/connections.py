"""The database connections of a web process with many threads.

A web process has a thread for each request it lets wait (LIVE_WAITERS_MAX) and some more for
the others. Each thread that served a request would keep a connection of its own
(CONN_MAX_AGE): hundreds a process, more than PostgreSQL takes. So a waiting request holds
none while it waits (claims.live.changes), and only CONN_KEPT_PER_PROCESS threads of a process
keep theirs from one request to the next; the others close it as their request ends.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.db import connections

_keepers: set[int] = set()
_lock = threading.Lock()


def release() -> None:
    """Close this thread's database connections (the next query opens one again); never one
    inside a transaction, which would be lost."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def keeps_connection(thread: int) -> bool:
    """Whether this thread is one of those that keep their connection between requests: the
    first CONN_KEPT_PER_PROCESS to ask (a gunicorn thread lives as long as its process)."""
    with _lock:
        if thread not in _keepers and len(_keepers) < settings.CONN_KEPT_PER_PROCESS:
            _keepers.add(thread)
        return thread in _keepers


def on_request_finished(**kwargs: Any) -> None:
    """A request_finished receiver (ClaimsConfig.ready), after a streamed body too."""
    if not keeps_connection(threading.get_ident()):
        release()
