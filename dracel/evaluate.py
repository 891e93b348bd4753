"""DRA device selectors evaluated for real with cel-python (quantity, semver, cel.bind)."""

import functools
import re
from decimal import Decimal
from typing import Any

import celpy
from celpy import celtypes

from dracel import compare

_ENV = celpy.Environment()
_BIND = re.compile(r"\bcel\.bind\(")
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


class CelError(Exception):
    """An expression that does not compile or cannot be evaluated for a device."""


@functools.lru_cache(maxsize=1024)  # bounded: the portal compiles what users type
def _compiled(expression: str) -> Any:
    try:
        return _ENV.program(_ENV.compile(expand_bind(expression)), functions=_FUNCTIONS)
    except celpy.CELParseError as error:
        line, column = error.line or 1, error.column or 1
        source = expression.splitlines()[line - 1] if expression.strip() else ""
        pointer = "." * (column - 1) + "^"
        detail = f"ERROR: <input>:{line}:{column}: Syntax error: unexpected input"
        raise CelError(f"{detail}\n | {source}\n | {pointer}") from None


QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
SUFFIXES: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity such as `80Gi` or `1500m`."""
    match = QUANTITY.match(str(text).strip())
    if not match:
        raise CelError(f"invalid quantity {text!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * Decimal(SUFFIXES.get(suffix, 1))


class Quantity(celtypes.StringType):
    """A CEL Quantity: a string that knows its value for compareTo() and friends."""

    cel_kind = "quantity"

    @property
    def amount(self) -> Decimal:
        return parse_quantity(str(self))

    def equals(self, other: "Quantity") -> bool:
        return self.amount == other.amount


class Semver(celtypes.StringType):
    """A CEL semver value (device attributes of kind `version`)."""

    cel_kind = "semver"

    def equals(self, other: "Semver") -> bool:
        """blang/semver's EQ: the version and its pre-release; build metadata is ignored."""
        return (self.parts, self.pre_release) == (other.parts, other.pre_release)

    @property
    def pre_release(self) -> str:
        core = str(self).split("+", 1)[0]
        return core.split("-", 1)[1] if "-" in core else ""

    @property
    def parts(self) -> tuple[int, int, int]:
        core = str(self).split("-", 1)[0].split("+", 1)[0]
        major, minor, patch = ([*core.split("."), "0", "0"])[:3]
        return int(major), int(minor), int(patch)


def _sign(difference: Any) -> celtypes.IntType:
    return celtypes.IntType((difference > 0) - (difference < 0))


def _compare_to(left: Any, right: Any) -> celtypes.IntType:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return _sign(left.amount - right.amount)
    if isinstance(left, Semver) and isinstance(right, Semver):
        a, b = left.parts, right.parts
        return _sign((a > b) - (a < b))
    raise CelError("compareTo() needs two quantities or two semvers")


def _quantity(text: Any) -> Quantity:
    parse_quantity(str(text))
    return Quantity(str(text))


def _semver(text: Any) -> Semver:
    version = Semver(str(text))
    if not version.parts:
        raise CelError(f"invalid semver {text!r}")
    return version


def _is_greater_than(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare_to(left, right) > 0)


def _is_less_than(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare_to(left, right) < 0)


def _lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(str(text).lower())


def _upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(str(text).upper())


def _as_approximate_float(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(value.amount))


def _as_integer(value: Any) -> celtypes.IntType:
    return celtypes.IntType(int(value.amount))


def _major(value: Any) -> celtypes.IntType:
    return celtypes.IntType(value.parts[0])


def _minor(value: Any) -> celtypes.IntType:
    return celtypes.IntType(value.parts[1])


def _patch(value: Any) -> celtypes.IntType:
    return celtypes.IntType(value.parts[2])


_FUNCTIONS: dict[str, celpy.CELFunction] = {
    **compare.OPERATORS,
    "quantity": _quantity,
    "semver": _semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "asApproximateFloat": _as_approximate_float,
    "asInteger": _as_integer,
    "major": _major,
    "minor": _minor,
    "patch": _patch,
}


def _split_arguments(text: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments from text[start] up to the closing paren."""
    arguments: list[str] = []
    depth, quote, current = 0, "", start
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            quote = "" if char == quote and text[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in _CLOSERS:
            depth += 1
        elif char in _CLOSERS.values():
            if depth == 0:
                return [*arguments, text[current:index]], index
            depth -= 1
        elif char == "," and depth == 0:
            arguments.append(text[current:index])
            current = index + 1
    raise CelError("ERROR: <input>: Syntax error: unterminated cel.bind(")


def expand_bind(expression: str) -> str:
    """cel.bind(name, init, body) rewritten as body with name replaced by (init).

    cel-python has no cel.bind macro; textual expansion keeps its meaning for the
    selectors DRA users write (the bound name is a plain identifier).
    """
    match = _BIND.search(expression)
    if not match:
        return expression
    arguments, end = _split_arguments(expression, match.end())
    if len(arguments) != 3:
        raise CelError("ERROR: <input>: Syntax error: cel.bind() takes three arguments")
    name, init, body = (argument.strip() for argument in arguments)
    pattern = re.compile(rf"(?<![\w.'\"]){re.escape(name)}\b")
    expanded = pattern.sub(lambda _: f"({expand_bind(init)})", expand_bind(body))
    return expand_bind(expression[: match.start()] + f"({expanded})" + expression[end + 1 :])


class _Domains(celtypes.MapType):
    """device.attributes / device.capacity: an unknown domain is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        if key not in self:
            return celtypes.MapType({})
        return super().__getitem__(key)


_SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def _attribute_value(value: Any) -> Any:
    """A typed attribute ({"string": ...}) or an already flattened one (the portal's inventory,
    where a version such as "9.0.0" is a string that still works with semver functions)."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if not isinstance(value, dict):
        text = str(value)
        return Semver(text) if _SEMVER.match(text) else celtypes.StringType(text)
    if "bool" in value:
        return celtypes.BoolType(value["bool"])
    if "int" in value:
        return celtypes.IntType(value["int"])
    if "version" in value:
        return Semver(value["version"])
    return celtypes.StringType(value.get("string", ""))


def _by_domain(entries: dict | None, driver: str, convert: Any) -> _Domains:
    domains: dict[str, dict] = {}
    for qualified, value in (entries or {}).items():
        domain, _, name = qualified.rpartition("/")
        domains.setdefault(domain or driver, {})[celtypes.StringType(name)] = convert(value)
    return _Domains(
        {celtypes.StringType(d): celtypes.MapType(names) for d, names in domains.items()}
    )


def _capacity_value(value: Any) -> Quantity:
    return Quantity(str(value["value"] if isinstance(value, dict) else value))


def device_activation(driver: str, device: dict) -> dict:
    """The `device` variable of a selector for one ResourceSlice device (v1 shape)."""
    attributes = _by_domain(device.get("attributes"), driver, _attribute_value)
    capacity = _by_domain(device.get("capacity"), driver, _capacity_value)
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(driver),
                celtypes.StringType("attributes"): attributes,
                celtypes.StringType("capacity"): capacity,
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                    bool(device.get("allowMultipleAllocations"))
                ),
            }
        )
    }


def holds(expression: str, activation: dict) -> bool:
    """Whether the selector holds for the device, as the scheduler evaluates it: an error
    (a missing attribute, no such overload) raises CelError, which stops the allocation, as
    the structured allocator's "CEL runtime error"; it is not a mismatch."""
    try:
        result = _compiled(expression).evaluate(activation)
    except (celpy.CELEvalError, TypeError, ValueError, KeyError) as error:
        raise CelError(_words(error)) from error
    if isinstance(result, celpy.CELEvalError):
        raise CelError(_words(result))
    return result is True or (isinstance(result, celtypes.BoolType) and bool(result))


def _words(error: Exception) -> str:
    return str(error.args[0]) if error.args else type(error).__name__


def matches(expression: str, activation: dict) -> bool:
    """True if the selector holds for the device; an evaluation error means no match."""
    try:
        return holds(expression, activation)
    except CelError:
        return False
