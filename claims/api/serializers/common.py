"""What the output serializers share: times and texts as DRF writes them, schema examples.

And the schema's plain types: a log as text, an error's detail.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, inline_serializer
from rest_framework import serializers


def _time(value: Any) -> Any:
    """A time as DRF's DateTimeField gives it with TIME_ZONE "UTC" (ISO 8601, "Z" for UTC),
    for the outputs built directly: DRF looks the current time zone up for every value."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _example(name: str, value: dict[str, Any]) -> list[OpenApiExample]:
    return [OpenApiExample(name, value=value, response_only=True)]


LOG_TEXT = OpenApiTypes.STR
ERROR_DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField()})
