"""Django's PostgreSQL backend, with a health check that costs no round trip when it can.

Django checks a persistent connection before its first use in each request (and each Celery
task: claims/tasks.py tidies connections as a request does) with `SELECT 1`, one round trip
each time. A connection the server has ended (a restart, pg_terminate_backend, an idle
timeout) has something to read while idle: the server's goodbye, or the end of the stream. So
the `SELECT 1` is asked only when the socket of an idle connection has something to read (or
the connection is not idle); a quiet idle socket is a live connection.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self) -> None:
        due = self.health_check_enabled and not self.health_check_done  # type: ignore[attr-defined,has-type]
        if self.connection is not None and due and self._idle_and_quiet():
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _idle_and_quiet(self) -> bool:
        connection = self.connection
        if connection.closed or connection.broken:
            return False
        if connection.info.transaction_status != pq.TransactionStatus.IDLE:
            return False
        poll = select.poll()
        poll.register(connection.fileno(), select.POLLIN | select.POLLPRI)
        return not poll.poll(0)
