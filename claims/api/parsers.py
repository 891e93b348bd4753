"""Request bodies the API reads: bounded in size and in JSON nesting, refused with a 4xx.

Python's json module recurses once per level: a body nested a few thousand levels deep
raised RecursionError, a 500. The depth is measured first, without recursion.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import IO, Any

from django.conf import settings
from django.utils.translation import gettext, gettext_lazy
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request

from claims.policy.limits import JSON_MAX_DEPTH

# A JSON string (its brackets do not nest anything), and the brackets that do.
STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
BRACKET = re.compile(r"[\[\]{}]")


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = gettext_lazy("The request body is larger than this portal accepts.")
    default_code = "request_too_large"


def max_body_bytes() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def too_large(size: int) -> RequestTooLarge:
    return RequestTooLarge(
        gettext("The request body has %(size)d bytes; this portal accepts at most %(max)d.")
        % {"size": size, "max": max_body_bytes()}
    )


def check_body_size(request: Request) -> None:
    """413 before any parser reads a body whose Content-Length is over the limit."""
    meta: Mapping[str, Any] = request.META
    try:
        size = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ParseError(gettext("The Content-Length header is not a number.")) from None
    if size > max_body_bytes():
        raise too_large(size)


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in a JSON text (0 for a bare value)."""
    brackets = BRACKET.findall(STRING.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, after checking the body's size and nesting depth."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = stream.read(max_body_bytes() + 1)
        if len(raw) > max_body_bytes():
            raise too_large(len(raw))
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as error:
            raise ParseError(
                gettext("JSON parse error - not %(encoding)s text: %(error)s")
                % {"encoding": encoding, "error": error}
            ) from None
        if (depth := json_depth(text)) > JSON_MAX_DEPTH:
            raise ParseError(
                gettext(
                    "The JSON body nests %(depth)d levels deep; at most %(max)d are accepted "
                    "(the API's bodies are flat objects)."
                )
                % {"depth": depth, "max": JSON_MAX_DEPTH}
            )
        return super().parse(io.BytesIO(raw), media_type, parser_context)
