"""CEL types and the declarations of the DRA selector environment (as the API server has them).

Names print as cel-go prints them in error messages (`map(string, google.protobuf.Any)`).
Upstream: k8s.io/dynamic-resource-allocation/cel/compile.go (the `device` variable) and
k8s.io/apiserver/pkg/cel (Kubernetes' base environment with the quantity and semver libraries).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CelType:
    name: str
    params: tuple[CelType, ...] = ()

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name

    @property
    def is_loose(self) -> bool:
        """dyn, the attribute type (protobuf Any), an error or a type parameter: fits anything."""
        return self.name in (DYN.name, ANY.name, ERROR.name) or self.name.startswith("_")


def list_of(element: CelType) -> CelType:
    return CelType("list", (element,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null_type")
DYN = CelType("dyn")
ANY = CelType("google.protobuf.Any")
ERROR = CelType("*error*")
TYPE = CelType("type")
TIMESTAMP = CelType("google.protobuf.Timestamp")
DURATION = CelType("google.protobuf.Duration")
QUANTITY = CelType("kubernetes.Quantity")
SEMVER = CelType("kubernetes.Semver")
DEVICE = CelType("kubernetes.DRADevice")
A = CelType("_A")
B = CelType("_B")

ATTRIBUTES = map_of(STRING, map_of(STRING, ANY))
CAPACITY = map_of(STRING, map_of(STRING, QUANTITY))


def device_fields(consumable_capacity: bool = False) -> dict[str, CelType]:
    """Fields of `device`; allowMultipleAllocations needs DRAConsumableCapacity (off in 1.34)."""
    fields = {"driver": STRING, "attributes": ATTRIBUTES, "capacity": CAPACITY}
    if consumable_capacity:
        fields["allowMultipleAllocations"] = BOOL
    return fields


@dataclass(frozen=True)
class Overload:
    receiver: bool
    args: tuple[CelType, ...]
    result: CelType


def _fn(*args: CelType, result: CelType) -> Overload:
    return Overload(False, args, result)


def _method(*args: CelType, result: CelType) -> Overload:
    return Overload(True, args, result)


_ORDERED = (INT, UINT, DOUBLE, STRING, BYTES, BOOL, TIMESTAMP, DURATION)
_NUMBERS = (INT, UINT, DOUBLE)
_COMPARE = [_fn(t, t, result=BOOL) for t in _ORDERED] + [
    _fn(a, b, result=BOOL) for a in _NUMBERS for b in _NUMBERS if a != b
]
_ARITHMETIC = [_fn(t, t, result=t) for t in _NUMBERS]

OPERATORS: dict[str, list[Overload]] = {
    "_==_": [_fn(A, A, result=BOOL)],
    "_!=_": [_fn(A, A, result=BOOL)],
    "_<_": _COMPARE,
    "_<=_": _COMPARE,
    "_>_": _COMPARE,
    "_>=_": _COMPARE,
    "_+_": [
        *_ARITHMETIC,
        _fn(STRING, STRING, result=STRING),
        _fn(BYTES, BYTES, result=BYTES),
        _fn(list_of(A), list_of(A), result=list_of(A)),
        _fn(TIMESTAMP, DURATION, result=TIMESTAMP),
        _fn(DURATION, TIMESTAMP, result=TIMESTAMP),
        _fn(DURATION, DURATION, result=DURATION),
    ],
    "_-_": [
        *_ARITHMETIC,
        _fn(TIMESTAMP, TIMESTAMP, result=DURATION),
        _fn(TIMESTAMP, DURATION, result=TIMESTAMP),
        _fn(DURATION, DURATION, result=DURATION),
    ],
    "_*_": _ARITHMETIC,
    "_/_": _ARITHMETIC,
    "_%_": [_fn(INT, INT, result=INT), _fn(UINT, UINT, result=UINT)],
    "-_": [_fn(INT, result=INT), _fn(DOUBLE, result=DOUBLE)],
    "!_": [_fn(BOOL, result=BOOL)],
    "_&&_": [_fn(BOOL, BOOL, result=BOOL)],
    "_||_": [_fn(BOOL, BOOL, result=BOOL)],
    "_?_:_": [_fn(BOOL, A, A, result=A)],
    "@in": [_fn(A, list_of(A), result=BOOL), _fn(A, map_of(A, B), result=BOOL)],
    "_[_]": [_fn(list_of(A), INT, result=A), _fn(map_of(A, B), A, result=B)],
}

_SIZED = (STRING, BYTES, list_of(A), map_of(A, B))
_COMPARABLE = (QUANTITY, SEMVER)

FUNCTIONS: dict[str, list[Overload]] = {
    "size": [_fn(t, result=INT) for t in _SIZED] + [_method(t, result=INT) for t in _SIZED],
    "contains": [_method(STRING, STRING, result=BOOL)],
    "startsWith": [_method(STRING, STRING, result=BOOL)],
    "endsWith": [_method(STRING, STRING, result=BOOL)],
    "matches": [_method(STRING, STRING, result=BOOL), _fn(STRING, STRING, result=BOOL)],
    "lowerAscii": [_method(STRING, result=STRING)],
    "upperAscii": [_method(STRING, result=STRING)],
    "trim": [_method(STRING, result=STRING)],
    "charAt": [_method(STRING, INT, result=STRING)],
    "indexOf": [
        _method(STRING, STRING, result=INT),
        _method(STRING, STRING, INT, result=INT),
        _method(list_of(A), A, result=INT),
    ],
    "lastIndexOf": [
        _method(STRING, STRING, result=INT),
        _method(STRING, STRING, INT, result=INT),
        _method(list_of(A), A, result=INT),
    ],
    "replace": [
        _method(STRING, STRING, STRING, result=STRING),
        _method(STRING, STRING, STRING, INT, result=STRING),
    ],
    "split": [
        _method(STRING, STRING, result=list_of(STRING)),
        _method(STRING, STRING, INT, result=list_of(STRING)),
    ],
    "substring": [
        _method(STRING, INT, result=STRING),
        _method(STRING, INT, INT, result=STRING),
    ],
    "join": [
        _method(list_of(STRING), result=STRING),
        _method(list_of(STRING), STRING, result=STRING),
    ],
    "find": [_method(STRING, STRING, result=STRING)],
    "findAll": [
        _method(STRING, STRING, result=list_of(STRING)),
        _method(STRING, STRING, INT, result=list_of(STRING)),
    ],
    "quantity": [_fn(STRING, result=QUANTITY)],
    "isQuantity": [_fn(STRING, result=BOOL)],
    "semver": [_fn(STRING, result=SEMVER), _fn(STRING, BOOL, result=SEMVER)],
    "isSemver": [_fn(STRING, result=BOOL), _fn(STRING, BOOL, result=BOOL)],
    "compareTo": [_method(t, t, result=INT) for t in _COMPARABLE],
    "isGreaterThan": [_method(t, t, result=BOOL) for t in _COMPARABLE],
    "isLessThan": [_method(t, t, result=BOOL) for t in _COMPARABLE],
    "major": [_method(SEMVER, result=INT)],
    "minor": [_method(SEMVER, result=INT)],
    "patch": [_method(SEMVER, result=INT)],
    "sign": [_method(QUANTITY, result=INT)],
    "isInteger": [_method(QUANTITY, result=BOOL)],
    "asInteger": [_method(QUANTITY, result=INT)],
    "asApproximateFloat": [_method(QUANTITY, result=DOUBLE)],
    "add": [_method(QUANTITY, QUANTITY, result=QUANTITY), _method(QUANTITY, INT, result=QUANTITY)],
    "sub": [_method(QUANTITY, QUANTITY, result=QUANTITY), _method(QUANTITY, INT, result=QUANTITY)],
    "int": [_fn(t, result=INT) for t in (INT, UINT, DOUBLE, STRING, TIMESTAMP, DURATION)],
    "uint": [_fn(t, result=UINT) for t in (INT, UINT, DOUBLE, STRING)],
    "double": [_fn(t, result=DOUBLE) for t in (INT, UINT, DOUBLE, STRING)],
    "string": [_fn(t, result=STRING) for t in (*_ORDERED[:5], BOOL, TIMESTAMP, DURATION)],
    "bool": [_fn(BOOL, result=BOOL), _fn(STRING, result=BOOL)],
    "bytes": [_fn(BYTES, result=BYTES), _fn(STRING, result=BYTES)],
    "dyn": [_fn(A, result=DYN)],
    "type": [_fn(A, result=TYPE)],
}

# Declared in the API server's base environment, typed loosely here (any arguments, dyn result):
# a selector using them is accepted as the real server would, without checking their overloads.
_LOOSE_NAMES = (
    "timestamp duration getDate getDayOfMonth getDayOfWeek getDayOfYear getFullYear getHours "
    "getMilliseconds getMinutes getMonth getSeconds ip cidr isIP isCIDR family isUnspecified "
    "isLoopback isLinkLocalMulticast isLinkLocalUnicast isGlobalUnicast containsIP containsCIDR "
    "masked prefixLength url isURL getScheme getHost getHostname getPort getEscapedPath getQuery "
    "isSorted sum min max reverse slice flatten distinct sort sortBy range first last format "
    "quote strings.quote named validate sets.contains sets.equivalent sets.intersects "
    "lists.range base64.encode base64.decode math.greatest math.least math.ceil math.floor "
    "math.round math.trunc math.abs math.sign math.isInf math.isNaN math.isFinite math.bitAnd "
    "math.bitOr math.bitXor math.bitNot math.bitShiftLeft math.bitShiftRight math.sqrt "
    "transformList transformMap transformMapEntry optional.of optional.ofNonZeroValue "
    "optional.none hasValue value or orValue"
)
LOOSE_FUNCTIONS = frozenset(_LOOSE_NAMES.split())

MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
