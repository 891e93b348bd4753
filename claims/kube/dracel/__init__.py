"""The DRA CEL environment, shared by kubesim and the portal (needs only cel-python).

`compile_error` checks a selector as kube-apiserver 1.34 does when it validates a
ResourceClaim, ResourceClaimTemplate or DeviceClass (staging/src/k8s.io/dynamic-resource-
allocation/cel/compile.go): the expression must parse, type-check against the declared
`device` variable and the libraries, and evaluate to bool (or the attribute type). The
message is the `Detail` the API server prints after `Invalid value: "<expression>": `.
`matches` evaluates a selector against one device, as the scheduler does.
"""

from __future__ import annotations

import functools

from claims.kube.dracel.checker import Checker
from claims.kube.dracel.evaluate import (
    CelError,
    device_activation,
    expand_bind,
    matches,
    parse_quantity,
)
from claims.kube.dracel.source import SyntaxIssue, display, parse
from claims.kube.dracel.types import ANY, BOOL, device_fields

__all__ = [
    "CelError",
    "compile_error",
    "device_activation",
    "expand_bind",
    "matches",
    "parse_quantity",
]


@functools.lru_cache(maxsize=1024)
def compile_error(expression: str, *, consumable_capacity: bool = False) -> str | None:
    """None if the API server accepts the selector, else its detail ("compilation failed: ...").

    `consumable_capacity` is the DRAConsumableCapacity gate (alpha, off in 1.34), which adds
    `device.allowMultipleAllocations`.
    """
    try:
        tree = parse(expression)
    except SyntaxIssue as error:
        return "compilation failed: " + display(expression, [error.issue])
    checker = Checker(expression, device_fields(consumable_capacity))
    result = checker.check(tree)
    if checker.issues:
        return "compilation failed: " + display(expression, checker.issues)
    if result not in (BOOL, ANY):
        return f"must evaluate to bool or the unknown type, not {result}"
    return None
