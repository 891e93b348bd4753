"""Django's PostgreSQL backend, with a health check that costs no round trip when it can.

With the pool (DB_POOL_SIZE, the default: database_settings.py) the pool checks a connection
before it lends it; Django would have it ask the server each time (psycopg_pool's check, an
empty query). Without the pool, Django checks a kept connection before its first use in each
request (and each Celery task: portal/celery.py tidies connections as a request does) with
`SELECT 1`. Here both ask only when the socket of an idle connection has something to read
(health.py).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from portal.postgresql.health import check, idle_and_quiet


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        pools: dict[str, Any] = self._connection_pools  # type: ignore[attr-defined]
        if options and self.alias != NO_DB_ALIAS and self.alias not in pools:
            # As Django makes it (which then takes it as its own), but with health.check.
            pool = ConnectionPool(
                kwargs={**self.get_connection_params(), "autocommit": True},
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check,
                **({} if options is True else options),
            )
            pools.setdefault(self.alias, pool)
        return super().pool

    def close_if_health_check_failed(self) -> None:
        due = self.health_check_enabled and not self.health_check_done  # type: ignore[attr-defined,has-type]
        if self.connection is not None and due and idle_and_quiet(self.connection):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
