"""JSON and base64 decoding that fails with the words of Go's encoding/json and
encoding/base64, which the API server passes on to clients, and the strict decoder's
duplicate-field check (sigs.k8s.io/json)."""

from __future__ import annotations

import base64
import binascii
import json
import string
from typing import Any

URL_ALPHABET = set(string.ascii_letters + string.digits + "-_")
_GO_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}


class GoJsonError(ValueError):
    """A decoding error; str() is Go's message."""


def quote_byte(byte: int) -> str:
    """A byte as Go's encoding/json quoteChar prints it in a syntax error."""
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    if byte in _GO_ESCAPES:
        return f"'{_GO_ESCAPES[byte]}'"
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    char = chr(byte)  # Go widens the byte to the rune of the same number
    if byte == ord("\\"):
        return "'\\\\'"
    return f"'{char}'" if char.isprintable() else f"'\\u{byte:04x}'"


def _byte_at(text: str, position: int) -> int:
    char = text[position]
    if 0xDC80 <= ord(char) <= 0xDCFF:  # an undecodable byte, kept by surrogateescape
        return ord(char) - 0xDC00
    return char.encode("utf-8")[0]


def _inside_object(text: str, position: int) -> bool:
    """Whether `position` lies directly inside an object (not an array), strings skipped."""
    stack, in_string, escaped = [], False, False
    for char in text[:position]:
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
    return bool(stack) and stack[-1] == "{"


def _go_message(error: json.JSONDecodeError) -> str:
    text, position = error.doc, error.pos
    if not text[position:].strip(" \t\r\n") or error.msg.startswith("Unterminated string"):
        return "unexpected end of JSON input"
    character = quote_byte(_byte_at(text, position))
    if error.msg.startswith("Expecting property name"):
        return f"invalid character {character} looking for beginning of object key string"
    if error.msg.startswith("Expecting ':'"):
        return f"invalid character {character} after object key"
    if error.msg.startswith("Expecting ','"):
        where = "object key:value pair" if _inside_object(text, position) else "array element"
        return f"invalid character {character} after {where}"
    if error.msg.startswith("Extra data"):
        return f"invalid character {character} after top-level value"
    if error.msg.startswith("Invalid control character"):
        return f"invalid character {character} in string literal"
    if error.msg.startswith("Invalid \\escape"):
        return f"invalid character {quote_byte(_byte_at(text, position + 1))} in string escape code"
    return f"invalid character {character} looking for beginning of value"


def _no_constant(name: str) -> Any:
    raise GoJsonError(
        f"invalid character {quote_byte(ord(name[0]))} looking for beginning of value"
    )


def loads(data: bytes | str, *, duplicates: list[str] | None = None) -> Any:
    """Decode JSON as Go does (the last of two equal keys wins); with `duplicates`, the
    paths of repeated fields (`metadata.name`) are appended to it."""
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    seen: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            keys = [key for key, _ in items]
            seen[id(obj)] = [key for index, key in enumerate(keys) if key in keys[:index]]
        return obj

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise GoJsonError(_go_message(error)) from None
    if duplicates is not None and seen:
        duplicates += _duplicate_paths(value, "", seen)
    return value


def _duplicate_paths(value: Any, path: str, seen: dict[int, list[str]]) -> list[str]:
    if isinstance(value, list):
        found = []
        for index, item in enumerate(value):
            found += _duplicate_paths(item, f"{path}[{index}]", seen)
        return found
    if not isinstance(value, dict):
        return []
    found = [f"{path}.{key}" if path else key for key in seen.get(id(value), [])]
    for key, item in value.items():
        found += _duplicate_paths(item, f"{path}.{key}" if path else key, seen)
    return found


def raw_url_b64decode(text: str) -> bytes:
    """base64.RawURLEncoding.DecodeString: URL alphabet, no padding."""
    for index, char in enumerate(text):
        if char not in URL_ALPHABET:
            raise ValueError(f"illegal base64 data at input byte {index}")
    if len(text) % 4 == 1:
        raise ValueError(f"illegal base64 data at input byte {len(text) - 1}")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise ValueError(f"illegal base64 data at input byte {len(text) - 1}") from error


def raw_url_b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def parse_int(text: str) -> int:
    """strconv.ParseInt(text, 10, 64), failing with its words."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value
