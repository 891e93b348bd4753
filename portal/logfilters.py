"""Logging filters that keep the terminal of `make run` readable.

A live page keeps one request open that waits for the next change and then asks again; the
dev server would print a line for each. An ordinary 403 or 404 is the answer working as
designed, not a fault: one line, no traceback.
"""

from __future__ import annotations

import logging
import re

# Waits of the live pages (?since=), the dashboard (?seen=) and the API long-poll (?wait=).
LIVE_WAIT = re.compile(r"[?&](since|seen|wait)=")
QUIET_STATUSES = {200, 204, 286, 304}
CLIENT_ERRORS = {401, 403, 404, 405}


def quiet_live_waits(record: logging.LogRecord) -> bool:
    """Drop the access-log line of a live wait that ended normally; keep errors."""
    args = record.args if isinstance(record.args, tuple) else ()
    status = getattr(record, "status_code", None) or (args[1] if len(args) > 1 else None)
    try:
        quiet = int(str(status)) in QUIET_STATUSES
    except ValueError:
        quiet = False
    return not (quiet and LIVE_WAIT.search(str(args[0]) if args else record.getMessage()))


def no_traceback_for_client_errors(record: logging.LogRecord) -> bool:
    """Keep the line of a 403/404, without the traceback Django attaches to it."""
    if getattr(record, "status_code", None) in CLIENT_ERRORS:
        record.exc_info = None
        record.exc_text = None
    return True
