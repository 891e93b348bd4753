"""The database connections of a web process with many threads.

A web process has a thread for each request it lets wait (LIVE_WAITERS_MAX) and some more for
the others. Each thread that served a request would keep a connection of its own
(CONN_MAX_AGE): hundreds a process, more than PostgreSQL takes. So only
CONN_KEPT_PER_PROCESS threads of a process keep theirs from one request to the next, and while
a request of theirs waits (claims.live.changes); the others close it as their request ends and
hold none while they wait.
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


def release_while_waiting() -> None:
    """Before a request waits: a thread that keeps its connection between requests keeps it
    while it waits too (it holds it again at its next request anyway, and answering at once
    is the point of waking); the others let theirs go."""
    if not keeps_connection(threading.get_ident()):
        release()


def check_after_waiting() -> None:
    """After a wait: a kept connection the server ended meanwhile (a restart, an idle
    timeout) is closed, so the answer's queries open a new one rather than fail. Checked as
    at a request's start (portal/postgresql/base.py: no round trip while its socket is
    quiet)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.health_check_done = False  # type: ignore[attr-defined]
            connection.close_if_health_check_failed()


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
