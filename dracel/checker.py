"""A type checker for DRA selectors over cel-python's parse tree, after cel-go's checker.

It covers what selectors use: the `device` variable and its typed fields, map and list
indexing, operators, the string, quantity and semver libraries, macros (has, all, exists,
exists_one, map, filter) and cel.bind. Each problem is reported where cel-go reports it
(the `.` of a field selection, the `(` of a call, the operator), in cel-go's words.
"""

from __future__ import annotations

from collections.abc import Callable

from lark import Token, Tree

from dracel import types as t
from dracel.source import Issue
from dracel.types import CelType, Overload

_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_LEFT_ASSOC = {"conditionalor": "_||_", "conditionaland": "_&&_"}
_LITERALS = {
    "INT_LIT": t.INT,
    "UINT_LIT": t.UINT,
    "FLOAT_LIT": t.DOUBLE,
    "STRING_LIT": t.STRING,
    "MLSTRING_LIT": t.STRING,
    "BYTES_LIT": t.BYTES,
    "BOOL_LIT": t.BOOL,
    "NULL_LIT": t.NULL,
}
_TYPE_NAMES = frozenset(
    ["bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type", "dyn"]
)


class Checker:
    def __init__(self, source: str, fields: dict[str, CelType]) -> None:
        self.source = source
        self.fields = fields
        self.issues: list[Issue] = []
        self.scopes: list[dict[str, CelType]] = []

    # -- helpers ---------------------------------------------------------------------------

    def report(self, offset: int, message: str) -> CelType:
        self.issues.append(Issue(offset, message))
        return t.ERROR

    def after(self, node: Tree | Token) -> int:
        """Offset of the first non-blank character after a node (an operator or bracket)."""
        end = node.end_pos if isinstance(node, Token) else node.meta.end_pos
        offset = int(end or 0)
        while offset < len(self.source) and self.source[offset].isspace():
            offset += 1
        return offset

    def call(self, name: str, overloads: list[Overload], args: list[CelType], offset: int, *,
             receiver: bool = False) -> CelType:  # fmt: skip
        results = []
        for overload in overloads:
            if overload.receiver != receiver or len(overload.args) != len(args):
                continue
            bindings: dict[str, CelType] = {}
            if all(_fits(p, a, bindings) for p, a in zip(overload.args, args, strict=True)):
                results.append(_substitute(overload.result, bindings))
        if not results:
            return self.report(offset, _no_overload(name, args, receiver))
        return results[0] if all(r == results[0] for r in results) else t.DYN

    # -- dispatch --------------------------------------------------------------------------

    def check(self, node: Tree) -> CelType:
        handler: Callable[[Tree], CelType] = getattr(self, f"_{node.data}", self._single)
        return handler(node)

    def _single(self, node: Tree) -> CelType:
        return self.check(node.children[0])

    def _expr(self, node: Tree) -> CelType:
        if len(node.children) == 1:
            return self._single(node)
        cond, then, other = node.children
        args = [self.check(cond), self.check(then), self.check(other)]
        return self.call("_?_:_", t.OPERATORS["_?_:_"], args, self.after(cond))

    def _binary(self, name: str, left: Tree, right: Tree) -> CelType:
        args = [self.check(left), self.check(right)]
        return self.call(name, t.OPERATORS[name], args, self.after(left))

    def _left_assoc(self, node: Tree) -> CelType:
        if len(node.children) == 1:
            return self._single(node)
        left, right = node.children
        return self._binary(_LEFT_ASSOC[str(node.data)], left, right)

    _conditionalor = _left_assoc
    _conditionaland = _left_assoc

    def _operation(self, node: Tree) -> CelType:
        if len(node.children) == 1:
            return self._single(node)
        operator, right = node.children
        assert isinstance(operator, Tree)
        left = operator.children[0]
        return self._binary(_BINARY[str(operator.data)], left, right)

    _relation = _operation
    _addition = _operation
    _multiplication = _operation

    def _unary(self, node: Tree) -> CelType:
        if len(node.children) == 1:
            return self._single(node)
        operator, operand = node.children
        assert isinstance(operator, Tree)
        name = "!_" if operator.data == "unary_not" else "-_"
        offset = int(operator.meta.start_pos or 0)
        return self.call(name, t.OPERATORS[name], [self.check(operand)], offset)

    # -- members ---------------------------------------------------------------------------

    def _member_dot(self, node: Tree) -> CelType:
        target, field = node.children
        return self.select(self.check(target), str(field), self.after(target))

    def select(self, target: CelType, field: str, offset: int) -> CelType:
        if target == t.DEVICE:
            if field in self.fields:
                return self.fields[field]
            return self.report(offset, f"undefined field '{field}'")
        if target.name == "map":
            return target.params[1]
        if target.is_loose:
            return t.ERROR if target == t.ERROR else t.DYN
        return self.report(offset, f"type '{target}' does not support field selection")

    def _member_index(self, node: Tree) -> CelType:
        target, index = node.children
        args = [self.check(target), self.check(index)]
        return self.call("_[_]", t.OPERATORS["_[_]"], args, self.after(target))

    def _member_object(self, node: Tree) -> CelType:
        return t.DYN

    def _member_dot_arg(self, node: Tree) -> CelType:
        target, name, *rest = node.children
        args = _arguments(rest)
        assert isinstance(target, Tree) and isinstance(name, Token)
        offset = self.after(name)
        namespace = _plain_ident(target)
        if namespace == "cel" and str(name) == "bind" and "cel" not in self._names():
            return self.bind(args, offset)
        if str(name) in t.MACROS and str(name) != "has" and args and _plain_ident(args[0]):
            return self.comprehension(str(name), self.check(target), args, offset)
        if (
            namespace
            and namespace not in self._names()
            and f"{namespace}.{name}" in t.LOOSE_FUNCTIONS
        ):
            self._check_all(args)
            return t.DYN
        receiver = self.check(target)
        return self.function(str(name), [receiver, *self._check_all(args)], offset, receiver=True)

    def function(self, name: str, args: list[CelType], offset: int, *, receiver: bool) -> CelType:
        if name in t.FUNCTIONS:
            return self.call(name, t.FUNCTIONS[name], args, offset, receiver=receiver)
        if name in t.LOOSE_FUNCTIONS:
            return t.DYN
        return self.report(offset, f"undeclared reference to '{name}' (in container '')")

    def _check_all(self, args: list[Tree]) -> list[CelType]:
        return [self.check(arg) for arg in args]

    # -- macros ----------------------------------------------------------------------------

    def bind(self, args: list[Tree], offset: int) -> CelType:
        name = _plain_ident(args[0]) if len(args) == 3 else None
        if name is None:
            return self.report(offset, "cel.bind() variable name must be a simple identifier")
        self.scopes.append({name: self.check(args[1])})
        try:
            return self.check(args[2])
        finally:
            self.scopes.pop()

    def comprehension(self, macro: str, target: CelType, args: list[Tree], offset: int) -> CelType:
        element = self.range_element(target, offset)
        scope = {_plain_ident(args[0]) or "": element}
        two_variables = macro in ("all", "exists", "exists_one") and len(args) == 3
        if two_variables:
            second = target.params[-1] if target.name in ("list", "map") else t.DYN
            scope = {
                _plain_ident(args[0]) or "": _index_type(target),
                _plain_ident(args[1]) or "": second,
            }
        self.scopes.append(scope)
        try:
            results = self._check_all(args[2 if two_variables else 1 :])
        finally:
            self.scopes.pop()
        if macro == "map":
            return t.list_of(results[-1])
        if macro == "filter":
            return t.list_of(element)
        return t.BOOL

    def range_element(self, target: CelType, offset: int) -> CelType:
        if target.name in ("list", "map"):
            return target.params[0]
        if target.is_loose:
            return t.DYN
        self.report(
            offset,
            f"expression of type '{target}' cannot be range of a comprehension "
            "(must be list, map, or dynamic)",
        )
        return t.DYN

    def has(self, args: list[Tree], offset: int) -> CelType:
        selection = _selection(args[0]) if len(args) == 1 else None
        if selection is None:
            return self.report(offset, "invalid argument to has() macro")
        target, field = selection
        self.select(self.check(target), str(field), self.after(target))
        return t.BOOL

    # -- primaries -------------------------------------------------------------------------

    def _literal(self, node: Tree) -> CelType:
        token = node.children[0]
        assert isinstance(token, Token)
        return _LITERALS.get(token.type, t.DYN)

    def _ident(self, node: Tree) -> CelType:
        token = node.children[0]
        assert isinstance(token, Token)
        return self.resolve(str(token), int(token.start_pos or 0))

    _dot_ident = _ident

    def resolve(self, name: str, offset: int) -> CelType:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name == "device":
            return t.DEVICE
        if name in _TYPE_NAMES:
            return t.TYPE
        return self.report(offset, f"undeclared reference to '{name}' (in container '')")

    def _names(self) -> set[str]:
        return {name for scope in self.scopes for name in scope} | {"device"}

    def _ident_arg(self, node: Tree) -> CelType:
        name, *rest = node.children
        assert isinstance(name, Token)
        args = _arguments(rest)
        if str(name) == "has":
            return self.has(args, self.after(name))
        return self.function(str(name), self._check_all(args), self.after(name), receiver=False)

    _dot_ident_arg = _ident_arg

    def _list_lit(self, node: Tree) -> CelType:
        return t.list_of(_join(self._check_all(_arguments(node.children))))

    def _map_lit(self, node: Tree) -> CelType:
        values = self._check_all(_arguments(node.children))
        return t.map_of(_join(values[0::2]), _join(values[1::2]))


def _arguments(rest: list) -> list[Tree]:
    """The expressions of an optional exprlist / mapinits child."""
    if not rest:
        return []
    return [child for child in rest[0].children if isinstance(child, Tree)]


def _unwrap(node: Tree) -> Tree:
    """The innermost node of a chain of single-child wrappers (expr > ... > member)."""
    while (
        len(node.children) == 1
        and isinstance(node.children[0], Tree)
        and node.data not in ("member_dot", "ident", "literal")
    ):
        node = node.children[0]
    return node


def _plain_ident(node: Tree) -> str | None:
    inner = _unwrap(node)
    return str(inner.children[0]) if inner.data == "ident" else None


def _selection(node: Tree) -> tuple[Tree, Token] | None:
    inner = _unwrap(node)
    if inner.data != "member_dot":
        return None
    target, field = inner.children
    return target, field  # type: ignore[return-value]


def _index_type(target: CelType) -> CelType:
    if target.name == "list":
        return t.INT
    return target.params[0] if target.name == "map" else t.DYN


def _join(found: list[CelType]) -> CelType:
    if not found:
        return t.DYN
    return found[0] if all(f == found[0] for f in found) else t.DYN


def _fits(param: CelType, arg: CelType, bindings: dict[str, CelType]) -> bool:
    if param.name.startswith("_"):
        bound = bindings.get(param.name)
        if bound is None or bound.is_loose:
            bindings[param.name] = arg
            return True
        return _fits(bound, arg, bindings)
    if arg.is_loose or param.is_loose:
        return True
    if param.name != arg.name or len(param.params) != len(arg.params):
        return False
    return all(_fits(p, a, bindings) for p, a in zip(param.params, arg.params, strict=True))


def _substitute(result: CelType, bindings: dict[str, CelType]) -> CelType:
    if result.name.startswith("_"):
        return bindings.get(result.name, t.DYN)
    if result.params:
        return CelType(result.name, tuple(_substitute(p, bindings) for p in result.params))
    return result


def _no_overload(name: str, args: list[CelType], receiver: bool) -> str:
    shown = [str(arg) for arg in args]
    signature = f"({', '.join(shown)})"
    if receiver:
        signature = f"{shown[0]}.({', '.join(shown[1:])})"
    return f"found no matching overload for '{name}' applied to '{signature}'"
