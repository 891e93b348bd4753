"""An API request and the answers to it, as the handlers of every layer see them: a JSON
response, a Status error, or a chunked stream (watches, logs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from kubesim.base import errors


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Message
    body: bytes = b""
    user: Any = None  # the authenticated kubesim.auth.authentication.UserInfo
    # Fields the JSON body names twice (the last one counts): refused or warned about as
    # fieldValidation says, like the strict decoder's findings.
    duplicate_fields: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # 299 Warnings a handler adds

    def flag(self, name: str) -> bool:
        """Booleans as the API server reads them: anything but 0/false is true."""
        value = self.query.get(name)
        return value is not None and value.lower() not in ("0", "false")


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Stream:
    chunks: Iterator[bytes]
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_response(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return Response(status, body, headers=headers or [])


def error_response(error: errors.ApiError) -> Response:
    return json_response(error.code, error.status())
