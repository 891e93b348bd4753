"""The portal's DATABASES: PostgreSQL with kept, checked connections, or a SQLite file."""

import os
from pathlib import Path
from typing import Any

import dj_database_url


def databases(url: str, *, conn_max_age: int, var_dir: Path) -> dict[str, dict[str, Any]]:
    """DATABASES for portal/settings.py, which reads DATABASE_URL and CONN_MAX_AGE from the
    environment; a SQLite test database is kept in `var_dir`."""
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
