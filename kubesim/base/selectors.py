"""Label selectors (equality- and set-based) and field selectors, as in `?labelSelector=`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.base import labels
from kubesim.base.errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

META_FIELDS = ("metadata.name", "metadata.namespace")
# Fields a Go object always has: a missing bool reads "false" (spec.hostNetwork,
# spec.unschedulable); spec.host is the old name of spec.nodeName.
GO_FALSE = ("spec.hostNetwork", "spec.unschedulable")
ALIASES = {"spec.host": "spec.nodeName"}


def split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a `( ... )` value set."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


def label_matcher(selector: str | None) -> Matcher:
    if not selector:
        return lambda obj: True
    tests = labels.parse(selector)

    def matches(obj: dict[str, Any]) -> bool:
        found = obj.get("metadata", {}).get("labels") or {}
        return all(test(found) for test in tests)

    return matches


def field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "false" if path in GO_FALSE else ""
    if isinstance(value, list | dict):
        return ""  # not a selectable field (status.podIPs is accepted but never set)
    return str(value).lower() if isinstance(value, bool) else str(value)


def unknown_field_label(label: str, supported: tuple[str, ...], api_version: str, kind: str) -> str:
    """The field label conversion's refusal: the default one for kinds without their own
    (DefaultMetaV1FieldSelectorConversion), else the kind's (core, or a group's kind)."""
    if supported == META_FIELDS:
        return (
            f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    if "/" in api_version:
        return f"field label not supported for {api_version}, Kind={kind}: {label}"
    return f"field label not supported: {label}"


def field_matcher(
    selector: str | None,
    supported: tuple[str, ...] | None = None,
    *,
    api_version: str = "v1",
    kind: str = "",
) -> Matcher:
    if not selector:
        return lambda obj: True
    tests: list[tuple[str, bool, str]] = []
    for term in split_terms(selector):
        match = re.match(r"^\s*([A-Za-z0-9._]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not match:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        path, op, value = match.groups()
        if supported is not None and path not in supported:
            raise bad_request(unknown_field_label(path, supported, api_version, kind))
        tests.append((ALIASES.get(path, path), op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in tests)

    return matches
