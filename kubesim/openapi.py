"""OpenAPI v3 documents (placeholder until the generated schemas land)."""

from __future__ import annotations

from typing import Any


def document(api: Any, parts: list[str]) -> dict[str, Any] | None:
    if parts == ["v3"]:
        return {"paths": {}}
    return None
