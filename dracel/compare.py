"""Equality, ordering and `in` at run time, as cel-go evaluates them in Kubernetes' CEL.

Kubernetes' base environment (k8s.io/apiserver/pkg/cel/environment/base.go) turns on
`cel.CrossTypeNumericComparisons(true)` from 1.28, and cel-go's runtime equality is
heterogeneous (cel-go common/types: `Int.Equal`, `Double.Equal`, `String.Equal`, ...):

- numbers compare by value across int, uint and double: `1 == 1.0`, `1u < 1.5`, `2 > 1u`;
  a NaN equals nothing and cannot be ordered;
- values of different kinds are unequal, not an error: `"H100" == 1` is false;
- a quantity or a semver (k8s.io/apiserver/pkg/cel Quantity.Equal, Semver.Equal) on the left
  of `==` with anything but its own kind is "no such overload", an error;
- lists and maps are equal when their sizes match and no element (value under the same key)
  is unequal;
- ordering mixes only numbers; other kinds order only with their own kind.

Device attributes are typed `any` in the DRA environment (k8s.io/dynamic-resource-allocation/
cel/compile.go), so `device.attributes["gpu.nvidia.com"].index == 1.0` type-checks and runs
here; the checker (dracel.checker) refuses the same mix between two literals, as cel-go's does.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

NO_OVERLOAD = "no such overload"


def _kind(value: Any) -> str:
    # Quantity and Semver subclass StringType here; they are their own kinds in cel-go.
    kind = getattr(value, "cel_kind", None)
    if kind:
        return str(kind)
    if value is None or isinstance(value, celtypes.NullType):
        return "null"
    if isinstance(value, celtypes.BoolType | bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, celtypes.MapType | dict):
        return "map"
    if isinstance(value, celtypes.ListType | list):
        return "list"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if isinstance(value, datetime.timedelta):
        return "duration"
    return type(value).__name__


def _plain_number(value: Any) -> int | float:
    return float(value) if isinstance(value, float) else int(value)


def equal(left: Any, right: Any) -> bool:
    """cel-go's `types.Equal(left, right)`; TypeError where it returns "no such overload"."""
    left_kind, right_kind = _kind(left), _kind(right)
    if "null" in (left_kind, right_kind):
        return left_kind == right_kind
    if left_kind in ("quantity", "semver"):
        if right_kind != left_kind:
            raise TypeError(NO_OVERLOAD)
        return bool(left.equals(right))
    if left_kind != right_kind:
        return False
    if left_kind == "number":
        a, b = _plain_number(left), _plain_number(right)
        return not (isinstance(a, float) and math.isnan(a)) and a == b  # NaN equals nothing
    if left_kind == "list":
        return len(left) == len(right) and all(
            _not_unequal(a, b) for a, b in zip(left, right, strict=True)
        )
    if left_kind == "map":
        return len(left) == len(right) and all(
            _has_key(right, key) and _not_unequal(value, _find(right, key))
            for key, value in left.items()
        )
    if left_kind == "bool":
        return bool(left) == bool(right)
    return bool(left == right) if left_kind in ("string", "bytes") else _python_equal(left, right)


def _python_equal(left: Any, right: Any) -> bool:
    try:
        return bool(left == right)
    except TypeError:
        return False


def _not_unequal(left: Any, right: Any) -> bool:
    """An element pair of a list or map: only a false comparison makes the whole unequal."""
    try:
        return equal(left, right)
    except TypeError:
        return True


def _same_key(key: Any, candidate: Any) -> bool:
    try:
        return equal(key, candidate)
    except TypeError:
        return False


def _has_key(mapping: Any, key: Any) -> bool:
    return any(_same_key(key, candidate) for candidate in mapping)


def _find(mapping: Any, key: Any) -> Any:
    for candidate, value in mapping.items():
        if _same_key(key, candidate):
            return value
    raise KeyError(key)


def compare(left: Any, right: Any) -> int:
    """-1, 0 or 1 as cel-go's `Compare`; TypeError for kinds that cannot be ordered together."""
    left_kind, right_kind = _kind(left), _kind(right)
    if left_kind == "number" and right_kind == "number":
        a, b = _plain_number(left), _plain_number(right)
        if any(isinstance(n, float) and math.isnan(n) for n in (a, b)):
            raise ValueError("NaN values cannot be ordered")
        return (a > b) - (a < b)
    orderable = ("string", "bytes", "bool", "timestamp", "duration")
    if left_kind != right_kind or left_kind not in orderable:
        raise TypeError(NO_OVERLOAD)
    return (left > right) - (left < right)


def contains(item: Any, container: Any) -> bool:
    """`item in container`: a list element equal to it, or a map key equal to it."""
    kind = _kind(container)
    if kind == "map":
        return _has_key(container, item)
    if kind != "list":
        raise TypeError(NO_OVERLOAD)
    return any(_same_key(item, element) for element in container)


def _operator(function: Any) -> Any:
    def operator(left: Any, right: Any) -> Any:
        for value in (left, right):
            if isinstance(value, CELEvalError):
                return value
        try:
            return celtypes.BoolType(function(left, right))
        except (TypeError, ValueError) as error:
            return CELEvalError(str(error), error.__class__, error.args)

    operator.__name__ = function.__name__
    return operator


def _eq(left: Any, right: Any) -> bool:
    return equal(left, right)


def _ne(left: Any, right: Any) -> bool:
    return not equal(left, right)


def _lt(left: Any, right: Any) -> bool:
    return compare(left, right) < 0


def _le(left: Any, right: Any) -> bool:
    return compare(left, right) <= 0


def _gt(left: Any, right: Any) -> bool:
    return compare(left, right) > 0


def _ge(left: Any, right: Any) -> bool:
    return compare(left, right) >= 0


OPERATORS = {
    "_==_": _operator(_eq),
    "_!=_": _operator(_ne),
    "_<_": _operator(_lt),
    "_<=_": _operator(_le),
    "_>_": _operator(_gt),
    "_>=_": _operator(_ge),
    "_in_": _operator(contains),
}
