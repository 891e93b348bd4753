"""The portal's DATABASES: PostgreSQL through a bounded pool of checked connections per
process, or a SQLite file."""

import os
from pathlib import Path
from typing import Any

import dj_database_url


def databases(
    url: str, *, conn_max_age: int, pool_size: int, var_dir: Path
) -> dict[str, dict[str, Any]]:
    """DATABASES for portal/settings.py, which reads DATABASE_URL, CONN_MAX_AGE and
    DB_POOL_SIZE from the environment; a SQLite test database is kept in `var_dir`."""
    default: dict[str, Any] = dict(
        dj_database_url.parse(
            url,
            # Opening a PostgreSQL connection costs more than most of our queries: keep it for
            # a while, and check it before reuse so a restarted database costs one error, not
            # many.
            conn_max_age=conn_max_age,
            conn_health_checks=True,
        )
    )
    if default["ENGINE"] == "django.db.backends.postgresql":
        # Django's, with a health check that needs no round trip while the socket is quiet.
        default["ENGINE"] = "portal.postgresql"
        if pool_size:
            _pooled(default, pool_size)
    if default["ENGINE"] == "django.db.backends.sqlite3":
        # A file, not memory, so a Celery worker subprocess can share the test database; one
        # per test run, so runs started side by side in one checkout do not share it.
        default["TEST"] = {"NAME": str(var_dir / f"test_portal_{os.getpid()}.sqlite3")}
        default.setdefault("OPTIONS", {})
        default["OPTIONS"].update(
            {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL;",
            }
        )
    return {"default": default}


def _pooled(default: dict[str, Any], pool_size: int) -> None:
    """A pool per process, of at most `pool_size` connections, that every thread borrows from
    for a request or a task and gives back at its end. Without it, each of a web process's many
    threads would keep a connection of its own (hundreds, more than PostgreSQL takes), or open
    a new one, a server process, for each request."""
    default["CONN_MAX_AGE"] = 0  # given back at the end of each request or task, not closed
    default["CONN_HEALTH_CHECKS"] = False  # the pool checks (portal/postgresql) as it lends
    default.setdefault("OPTIONS", {})
    default["OPTIONS"]["pool"] = {
        "min_size": min(2, pool_size),
        "max_size": pool_size,
        # A thread waits this long for a connection when all are lent, then its request fails.
        "timeout": 30,
        "name": "portal",
    }
