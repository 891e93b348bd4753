"""gunicorn's settings for the portal's web processes (`--config python:portal.gunicorn_conf`).

gunicorn's own lines (start, workers) and one access line per request are written as the
portal's are: JSON in production, text in `make run` (LOG_FORMAT, as portal/settings.py reads
it), each access line with the request id the portal answered in X-Request-ID, so a log
collector can join it to the request's other lines.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from gunicorn.glogging import Logger

from portal.request_id import HEADER, NO_REQUEST, PortalJsonFormatter

accesslog = "-"
TEXT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def json_logs() -> bool:
    chosen = os.getenv("LOG_FORMAT", "").strip().lower()
    debug = os.getenv("DEBUG", "False").strip().lower() in ("1", "true", "yes", "on")
    return (chosen or ("text" if debug else "json")) == "json"


class _RequestIdDefault(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = NO_REQUEST
        return True


class PortalLogger(Logger):
    """gunicorn's logger with the portal's formatter, and access lines with fields."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        formatter = PortalJsonFormatter() if json_logs() else logging.Formatter(TEXT)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter)
                handler.addFilter(_RequestIdDefault())

    def access(self, resp: Any, req: Any, environ: dict, request_time: Any) -> None:
        if not self.access_log_enabled:
            return
        headers = {name.lower(): value for name, value in resp.headers}
        fields = {
            "request_id": headers.get(HEADER.lower(), NO_REQUEST),
            "method": environ.get("REQUEST_METHOD", ""),
            "path": environ.get("PATH_INFO", ""),  # never the query: it may carry a secret
            "status": resp.status_code,
            "duration_ms": round(request_time.total_seconds() * 1000, 1),
            "remote": environ.get("REMOTE_ADDR", ""),
        }
        shown = (fields["method"], fields["path"], fields["status"], fields["duration_ms"])
        self.access_log.info("%s %s %s %s ms", *shown, extra=fields)


logger_class = PortalLogger
