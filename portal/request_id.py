"""A request id on every log line: taken from X-Request-ID (set by the ingress or the caller)
or made up, kept in a contextvar for the request's thread, and returned in the response.

Logs are JSON in production (one object a line, for a log collector) and plain text in
`make run`: LOG_FORMAT picks, by default JSON when DEBUG is off.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse
from pythonjsonlogger.json import JsonFormatter

HEADER = "X-Request-ID"
# What a caller may send: enough for a UUID or a proxy's own ids, nothing that could forge a
# log line or a header.
ACCEPTED = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
NO_REQUEST = "-"

request_id: ContextVar[str] = ContextVar("request_id", default=NO_REQUEST)


def incoming_or_new(value: str | None) -> str:
    if value and ACCEPTED.match(value):
        return value
    return uuid.uuid4().hex


def request_id_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        token = request_id.set(incoming_or_new(request.headers.get(HEADER)))
        request.request_id = request_id.get()  # type: ignore[attr-defined]
        try:
            response = get_response(request)
            response[HEADER] = request_id.get()
            return response
        finally:
            request_id.reset(token)

    return middleware


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record ("-" outside a request: tasks, commands)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            # Django logs a 4xx answer after the middleware ended: from the request then.
            from_request = getattr(getattr(record, "request", None), "request_id", NO_REQUEST)
            current = request_id.get()
            record.request_id = from_request if current == NO_REQUEST else current
        return True


class PortalJsonFormatter(JsonFormatter):
    """One JSON object a line: time, level, logger, message, request_id, and any extras."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("fmt", "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s")
        kwargs.setdefault(
            "rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"}
        )
        kwargs.setdefault("timestamp", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
