"""The DRA CEL environment, shared by kubesim and the portal (needs only cel-python).

`compile_error` checks a selector as kube-apiserver 1.34 does when it validates a
ResourceClaim, ResourceClaimTemplate or DeviceClass (staging/src/k8s.io/dynamic-resource-
allocation/cel/compile.go): the expression must parse, type-check against the declared
`device` variable and the libraries, and evaluate to bool (or the attribute type). The
message is the `Detail` the API server prints after `Invalid value: "<expression>": `.
`first_problem` says the first thing wrong for people: what, and where (line, column), without
the parser's list of every token it could have taken.
`matches` evaluates a selector against one device, as the scheduler does: equality and ordering
as cel-go has them in Kubernetes (`dracel.compare`: numbers by value across int, uint and double,
other kinds unequal).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from dracel.checker import Checker
from dracel.evaluate import (
    CelError,
    device_activation,
    expand_bind,
    holds,
    matches,
    parse_quantity,
)
from dracel.source import Issue, SyntaxIssue, display, line_and_column, parse
from dracel.types import ANY, BOOL, CelType, device_fields

__all__ = [
    "CelError",
    "Problem",
    "compile_error",
    "device_activation",
    "expand_bind",
    "first_problem",
    "holds",
    "matches",
    "parse_quantity",
]


@functools.lru_cache(maxsize=1024)
def compile_error(expression: str, *, consumable_capacity: bool = False) -> str | None:
    """None if the API server accepts the selector, else its detail ("compilation failed: ...").

    `consumable_capacity` is the DRAConsumableCapacity gate (alpha, off in 1.34), which adds
    `device.allowMultipleAllocations`.
    """
    issues, result = _compiled(expression, consumable_capacity)
    if issues:
        return "compilation failed: " + display(expression, issues)
    if result not in (BOOL, ANY):
        return f"must evaluate to bool or the unknown type, not {result}"
    return None


@dataclass(frozen=True)
class Problem:
    """The first thing wrong with a selector, for people. `kind` is the Issue's kind, or
    "result" when it is no condition (`token` is then its type); `line` and `column` count
    from 1 as cel-go's do; `detail` is the checker's words for a "check"."""

    kind: str
    line: int
    column: int
    token: str = ""
    expected: str = ""
    detail: str = ""


def first_problem(expression: str, *, consumable_capacity: bool = False) -> Problem | None:
    """What compile_error refuses, reduced to its first issue (None when there is none)."""
    issues, result = _compiled(expression, consumable_capacity)
    if issues:
        issue = min(issues, key=lambda found: found.offset)
        line, column = line_and_column(expression, issue.offset)
        detail = _plain(issue.message) if issue.kind == "check" else ""
        return Problem(issue.kind, line, column + 1, issue.token, issue.expected, detail)
    if result not in (BOOL, ANY):
        return Problem("result", 1, 1, token=str(result))
    return None


def _compiled(expression: str, consumable_capacity: bool) -> tuple[list[Issue], CelType | None]:
    try:
        tree = parse(expression)
    except SyntaxIssue as error:
        return [error.issue], None
    checker = Checker(expression, device_fields(consumable_capacity))
    result = checker.check(tree)
    return checker.issues, result


def _plain(message: str) -> str:
    """The checker's words without cel-go's internals: '_==_' is '==', no empty container."""
    message = message.replace(" (in container '')", "")
    return re.sub(r"'_(\W{1,2})_'", r"'\1'", message).replace("'@in'", "'in'")
