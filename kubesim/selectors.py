"""Label selectors (equality- and set-based) and field selectors, as in `?labelSelector=`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*(!?)\s*([A-Za-z0-9._/-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ_TERM = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


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


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    equality = _EQ_TERM.match(term)
    if equality:
        key, op, value = equality.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    set_based = _SET_TERM.match(term)
    if not set_based:
        raise bad_request(f"unable to parse requirement: invalid label selector: {term!r}")
    negated, key, op, values_text = set_based.groups()
    if negated and op:
        raise bad_request(f"unable to parse requirement: {term!r}")
    if negated:
        return lambda labels: key not in labels
    if not op:
        return lambda labels: key in labels
    values = {value.strip() for value in values_text.split(",") if value.strip()}
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values


def label_matcher(selector: str | None) -> Matcher:
    if not selector:
        return lambda obj: True
    tests = [_label_term(term) for term in split_terms(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(test(labels) for test in tests)

    return matches


def field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def field_matcher(selector: str | None, supported: tuple[str, ...] | None = None) -> Matcher:
    if not selector:
        return lambda obj: True
    tests: list[tuple[str, bool, str]] = []
    for term in split_terms(selector):
        match = re.match(r"^\s*([A-Za-z0-9._]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not match:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        path, op, value = match.groups()
        if supported is not None and path not in supported:
            raise bad_request(f"field label not supported: {path}")
        tests.append((path, op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in tests)

    return matches
