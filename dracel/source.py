"""Parsing a selector with cel-python, and printing issues the way cel-go prints them."""

from __future__ import annotations

from dataclasses import dataclass

import celpy
import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

WIDE_DOT = "\uff0e"

# ANTLR's names for the tokens of CEL.g4, in the grammar's vocabulary order, and lark's names.
_VOCABULARY = [
    ("EQUAL", "'=='"),
    ("NOTEQUAL", "'!='"),
    ("IN", "'in'"),
    ("LESSTHAN", "'<'"),
    ("LESSEQUAL", "'<='"),
    ("MOREEQUAL", "'>='"),
    ("MORETHAN", "'>'"),
    ("AND", "'&&'"),
    ("OR", "'||'"),
    ("LSQB", "'['"),
    ("RSQB", "']'"),
    ("LBRACE", "'{'"),
    ("RBRACE", "'}'"),
    ("LPAR", "'('"),
    ("RPAR", "')'"),
    ("DOT", "'.'"),
    ("COMMA", "','"),
    ("MINUS", "'-'"),
    ("BANG", "'!'"),
    ("QMARK", "'?'"),
    ("COLON", "':'"),
    ("PLUS", "'+'"),
    ("STAR", "'*'"),
    ("SLASH", "'/'"),
    ("PERCENT", "'%'"),
    ("BOOL_LIT", "'true', 'false'"),
    ("NULL_LIT", "'null'"),
    ("FLOAT_LIT", "NUM_FLOAT"),
    ("INT_LIT", "NUM_INT"),
    ("UINT_LIT", "NUM_UINT"),
    ("STRING_LIT", "STRING"),
    ("BYTES_LIT", "BYTES"),
    ("IDENT", "IDENTIFIER"),
]
_OPERAND_START = {"LSQB", "LBRACE", "LPAR", "DOT", "MINUS", "BANG", "INT_LIT", "IDENT"}
_ALIASES = {"MLSTRING_LIT": "STRING_LIT", "$END": "<EOF>"}


@dataclass(frozen=True)
class Issue:
    """One problem at an offset, in cel-go's words (`message`). A syntax issue also says, for
    people, what kind it is (`kind`), the token or character at fault and what the parser
    wanted there: `expected` is one token (e.g. "')'"), "value" for anything that starts an
    operand, or "" when it wanted several things."""

    offset: int
    message: str
    kind: str = "check"  # "check" (the checker's), "character", "string", "token" or "end"
    token: str = ""
    expected: str = ""


class SyntaxIssue(Exception):
    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def parse(expression: str) -> lark.Tree:
    """celpy's parse tree (with positions), or SyntaxIssue in cel-go's words."""
    try:
        return celpy.Environment().compile(expression)
    except celpy.CELParseError as error:
        cause = error.__cause__ or error.__context__
        raise SyntaxIssue(_syntax_issue(expression, cause)) from None


def _syntax_issue(expression: str, cause: BaseException | None) -> Issue:
    if isinstance(cause, UnexpectedCharacters):
        offset = int(cause.pos_in_stream or 0)
        char = expression[offset]
        message = f"Syntax error: token recognition error at: '{char}'"
        return Issue(offset, message, "string" if char in "'\"" else "character", char)
    if isinstance(cause, UnexpectedToken):
        token = cause.token
        at_end = token.type == "$END"
        offset = len(expression) if at_end else int(token.start_pos or 0)
        shown = "<EOF>" if at_end else str(token)
        expecting = _expected(set(cause.expected))
        message = f"Syntax error: mismatched input '{shown}' expecting {expecting}"
        wanted = _wanted(set(cause.expected), expecting)
        return Issue(offset, message, "end" if at_end else "token", shown, wanted)
    return Issue(0, "Syntax error: unexpected input", "token")


def _wanted(names: set[str], expecting: str) -> str:
    """What the parser wanted, said shortly: "value", one token, or "" (several things)."""
    if {_ALIASES.get(name, name) for name in names} >= _OPERAND_START:
        return "value"
    return expecting if expecting.startswith("'") and "," not in expecting else ""


def _expected(names: set[str]) -> str:
    names = {_ALIASES.get(name, name) for name in names}
    if names >= _OPERAND_START:  # ANTLR names the whole set that may start an operand
        names |= _OPERAND_START | {"BOOL_LIT", "NULL_LIT", "FLOAT_LIT", "UINT_LIT", "BYTES_LIT"}
    shown = [text for name, text in _VOCABULARY if name in names]
    if "<EOF>" in names:
        shown.insert(0, "<EOF>")
    if len(shown) == 1 and "," not in shown[0]:
        return shown[0]
    return "{" + ", ".join(shown) + "}"


def line_and_column(source: str, offset: int) -> tuple[int, int]:
    """1-based line, 0-based column (in code points) of an offset."""
    before = source[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1)


def display(source: str, issues: list[Issue]) -> str:
    """cel-go's Issues.String(): each error with its line, sorted by position."""
    return "\n".join(_display_one(source, issue) for issue in sorted(issues, key=_position))


def _position(issue: Issue) -> int:
    return issue.offset


def _display_one(source: str, issue: Issue) -> str:
    line, column = line_and_column(source, issue.offset)
    text = f"ERROR: <input>:{line}:{column + 1}: {issue.message}"
    lines = source.split("\n")
    if line > len(lines):
        return text
    snippet = lines[line - 1].replace("\t", " ")
    dots = "".join("." if len(ch.encode()) == 1 else WIDE_DOT for ch in snippet[:column])
    return f"{text}\n | {snippet}\n | {dots}^"
