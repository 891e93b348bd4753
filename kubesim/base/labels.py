"""Label selectors parsed as apimachinery's labels.Parse does (lexer, parser and error
messages of k8s.io/apimachinery/pkg/labels/selector.go)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kubesim.base.errors import bad_request

Test = Callable[[dict[str, str]], bool]

SPECIAL = "=!(),><"
OPERATOR_TOKENS = ("!=", "==", "!", "(", ")", ",", "<", "=", ">")
KEYWORDS = ("in", "notin")
BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
IDENTIFIER, END = "identifier", "end"
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


class ParseError(Exception):
    pass


@dataclass(frozen=True)
class Token:
    kind: str  # IDENTIFIER, END, "error", a keyword or an operator
    text: str


def tokens(selector: str) -> list[Token]:
    found: list[Token] = []
    position = 0
    while True:
        while position < len(selector) and selector[position] in " \t\r\n":
            position += 1
        if position >= len(selector):
            return [*found, Token(END, "")]
        if selector[position] in SPECIAL:
            token, position = _special(selector, position)
        else:
            end = position
            while end < len(selector) and selector[end] not in SPECIAL + " \t\r\n":
                end += 1
            word = selector[position:end]
            token, position = Token(word if word in KEYWORDS else IDENTIFIER, word), end
        found.append(token)


def _special(selector: str, position: int) -> tuple[Token, int]:
    """The longest operator starting at `position` (scanSpecialSymbol)."""
    for operator in OPERATOR_TOKENS:
        if selector.startswith(operator, position):
            return Token(operator, operator), position + len(operator)
    return Token("error", f"error expected: keyword found '{selector[position]}'"), position + 1


class Parser:
    def __init__(self, selector: str) -> None:
        self.items = tokens(selector)
        self.position = 0

    def lookahead(self) -> Token:
        """The next token in a values context, where `in` and `notin` are identifiers."""
        token = self.items[self.position]
        return Token(IDENTIFIER, token.text) if token.kind in KEYWORDS else token

    def consume(self, *, values: bool = True) -> Token:
        token = self.lookahead() if values else self.items[self.position]
        self.position = min(self.position + 1, len(self.items) - 1)
        return token

    def parse(self) -> list[Test]:
        tests: list[Test] = []
        while True:
            token = self.lookahead()
            if token.kind == END:
                return tests
            if token.kind not in (IDENTIFIER, "!"):
                raise ParseError(
                    f"found '{token.text}', expected: !, identifier, or 'end of string'"
                )
            try:
                tests.append(self.requirement())
            except ParseError as error:
                raise ParseError(f"unable to parse requirement: {error}") from None
            after = self.consume()
            if after.kind == END:
                return tests
            if after.kind != ",":
                raise ParseError(f"found '{after.text}', expected: ',' or 'end of string'")
            following = self.lookahead()
            if following.kind not in (IDENTIFIER, "!"):
                raise ParseError(f"found '{following.text}', expected: identifier after ','")

    def requirement(self) -> Test:
        token, absent = self.consume(), False
        if token.kind == "!":
            token, absent = self.consume(), True
        if token.kind != IDENTIFIER:
            raise ParseError(f"found '{token.text}', expected: identifier")
        key = _valid_key(token.text)
        if self.lookahead().kind in (END, ","):
            return (lambda labels: key not in labels) if absent else (lambda labels: key in labels)
        if absent:
            raise ParseError(f"found '{self.lookahead().text}', expected: ',' or 'end of string'")
        operator = self.consume(values=False)
        if operator.kind in KEYWORDS:
            return _set_test(key, operator.kind, self.value_set())
        if operator.kind in ("=", "==", "!=", ">", "<"):
            return _exact_test(key, operator.kind, self.exact_value())
        raise ParseError(f"found '{operator.text}', expected: {BINARY_OPERATORS}")

    def exact_value(self) -> str:
        if self.lookahead().kind in (END, ","):
            return ""
        token = self.consume()
        if token.kind != IDENTIFIER:
            raise ParseError(f"found '{token.text}', expected: identifier")
        return token.text

    def value_set(self) -> set[str]:
        token = self.consume()
        if token.kind != "(":
            raise ParseError(f"found '{token.text}' expected: '('")
        following = self.lookahead()
        if following.kind == ")":
            self.consume()
            return {""}
        if following.kind not in (IDENTIFIER, ","):
            raise ParseError(f"found '{following.text}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume().kind != ")":
            raise ParseError(f"found '{following.text}', expected: ')'")
        return values

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            token = self.consume()
            if token.kind == IDENTIFIER:
                values.add(token.text)
                following = self.lookahead()
                if following.kind == ")":
                    return values
                if following.kind != ",":
                    raise ParseError(f"found '{following.text}', expected: ',' or ')'")
            elif token.kind == ",":
                if not values or self.lookahead().kind in (")", ","):
                    values.add("")
                if self.lookahead().kind == ")":
                    return values
                if self.lookahead().kind == ",":
                    self.consume()
            else:
                raise ParseError(f"found '{token.text}', expected: ',', or identifier")


def _valid_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    problems = []
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not QUALIFIED_NAME.match(name):
        problems.append(NAME_PART_MSG)
    if "/" in key and not (prefix and len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)):
        problems.append("prefix part must be a valid DNS subdomain")
    if problems:
        raise ParseError(f'key: Invalid value: "{key}": {"; ".join(problems)}')
    return key


def _valid_value(key: str, value: str, index: int) -> str:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        problem = "must be no more than 63 characters" if len(value) > 63 else LABEL_VALUE_MSG
        raise ParseError(f'values[{index}][{key}]: Invalid value: "{value}": {problem}')
    return value


def _set_test(key: str, operator: str, values: set[str]) -> Test:
    for index, value in enumerate(sorted(values)):
        _valid_value(key, value, index)
    if operator == "in":
        return lambda labels: key in labels and labels[key] in values
    return lambda labels: key not in labels or labels[key] not in values


def _exact_test(key: str, operator: str, value: str) -> Test:
    if operator in (">", "<"):
        if not re.fullmatch(r"[+-]?\d+", value):
            raise ParseError(
                f"values[0]: Invalid value: \"{value}\": for 'Gt', 'Lt' operators, the value "
                "must be an integer"
            )
        bound = int(value)
        above = operator == ">"
        return lambda labels: _compare(labels.get(key), bound, above=above)
    _valid_value(key, value, 0)
    if operator == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: key in labels and labels[key] == value


def _compare(label: str | None, bound: int, *, above: bool) -> bool:
    if label is None or not re.fullmatch(r"[+-]?\d+", label):
        return False
    return int(label) > bound if above else int(label) < bound


def parse(selector: str) -> list[Test]:
    """The requirements of a label selector; 400 with upstream's words when it is malformed."""
    try:
        return Parser(selector).parse()
    except ParseError as error:
        raise bad_request(str(error)) from None
