"""Defaulting and validation of core/v1 Secrets, as the API server does them.

`stringData` is merged into `data` (base64) on write and never stored, as the v1 to internal
conversion does; validation follows pkg/apis/core/validation ValidateSecret and
ValidateSecretUpdate for what the portal and the kubelet use (names, keys, the typed secrets'
required keys, `.dockercfg` / `.dockerconfigjson` being JSON objects, `immutable`).
"""

import base64
import binascii
import json
import re
from typing import Any

from kubesim.base import errors
from kubesim.registry.validation import (
    FORBIDDEN,
    INVALID,
    REQUIRED,
    TOO_LONG,
    FieldError,
    metadata_name_errors,
)

OPAQUE = "Opaque"
DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
DOCKER_CFG = "kubernetes.io/dockercfg"
MAX_SECRET_SIZE = 1024 * 1024
REDACTED = "<secret contents redacted>"
IMMUTABLE = "field is immutable when `immutable` is set"
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
# The keys each secret type requires (pkg/apis/core/types.go); dockercfg types also parse.
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    DOCKER_CFG: (".dockercfg",),
    DOCKER_CONFIG_JSON: (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
# Python's json error, as Go's encoding/json words the same mistake.
GO_JSON_ERRORS = (
    ("Expecting ',' delimiter", "after object key:value pair"),
    ("Expecting ':' delimiter", "after object key"),
    ("Expecting property name", "looking for beginning of object key string"),
    ("Extra data", "after top-level value"),
)


def default_secret(obj: dict) -> None:
    """Merge `stringData` into `data` (it overwrites) and default `type` to Opaque."""
    string_data = obj.pop("stringData", None)
    data = obj.get("data")
    if data is not None and not isinstance(data, dict):
        return  # validation reports the wrong type
    for value in (data or {}).values():
        _decode(value, "Secret")  # 400 for data that is not base64, as decoding does
    if isinstance(string_data, dict) and string_data:
        data = obj["data"] = data or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    if not obj.get("type"):
        obj["type"] = OPAQUE


def _decode(value: Any, kind: str) -> bytes:
    if value is None:
        return b""
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        byte = _bad_base64_byte(str(value))
        raise errors.bad_request(
            f'{kind} in version "v1" cannot be handled as a {kind}: '
            f"illegal base64 data at input byte {byte}"
        ) from None


def _bad_base64_byte(text: str) -> int:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    for index, char in enumerate(text):
        if char not in alphabet and char != "=":
            return index
    return len(text) - len(text) % 4


def secret_bytes(secret: dict, key: str) -> bytes | None:
    """The decoded value of `key` in the secret's data, None when absent."""
    data = secret.get("data") or {}
    if key not in data:
        return None
    try:
        return base64.b64decode(str(data[key] or ""))
    except (binascii.Error, ValueError):
        return None


def config_key_errors(bag: str, key: str) -> list[FieldError]:
    """IsConfigMapKey, for the keys of a Secret's or ConfigMap's `bag` (data, binaryData)."""
    problems = []
    if len(key) > 253:
        problems.append("must be no more than 253 characters")
    if not CONFIG_KEY.match(key):
        problems.append(CONFIG_KEY_MSG)
    if key == ".":
        problems.append("must not be '.'")
    elif key == "..":
        problems.append("must not be '..'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return [FieldError(INVALID, f"{bag}[{key}]", key, problem) for problem in problems]


def go_json_error(raw: bytes) -> str:
    """Go's json.Unmarshal error for `raw` into map[string]interface{}; "" when it parses."""
    text = raw.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        if not text[error.pos :].strip():
            return "unexpected end of JSON input"
        literal = _literal_error(text[error.pos :]) if error.msg == "Expecting value" else ""
        if literal:
            return literal
        context = "looking for beginning of value"
        for python, go in GO_JSON_ERRORS:
            if error.msg.startswith(python):
                context = go
        return f"invalid character {_go_char(text[error.pos])} {context}"
    if value is None or isinstance(value, dict):
        return ""
    kinds = {bool: "bool", str: "string", list: "array", int: "number", float: "number"}
    return (
        f"json: cannot unmarshal {kinds[type(value)]} into Go value of type "
        "map[string]interface {}"
    )


def _literal_error(rest: str) -> str:
    """Go's scanner reads a literal from its first letter: `nope` fails in "null"."""
    for literal in ("null", "true", "false"):
        if rest[:1] == literal[0]:
            for index, char in enumerate(literal):
                if index >= len(rest):
                    return "unexpected end of JSON input"
                if rest[index] != char:
                    return (
                        f"invalid character {_go_char(rest[index])} in literal {literal} "
                        f"(expecting '{char}')"
                    )
    return ""


def _go_char(char: str) -> str:
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    return f"'{char}'"


def _type_errors(secret: dict) -> list[FieldError]:
    kind = secret.get("type") or OPAQUE
    if kind == "kubernetes.io/service-account-token":
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        if not annotations.get("kubernetes.io/service-account.name"):
            field = "metadata.annotations[kubernetes.io/service-account.name]"
            return [FieldError(REQUIRED, field)]
        return []
    if kind == "kubernetes.io/basic-auth":
        data = secret.get("data") or {}
        if "username" not in data and "password" not in data:
            return [FieldError(REQUIRED, "data[username]"), FieldError(REQUIRED, "data[password]")]
        return []
    errors_found = []
    for key in REQUIRED_KEYS.get(kind, ()):
        raw = secret_bytes(secret, key)
        if raw is None or (kind == "kubernetes.io/ssh-auth" and not raw):
            errors_found.append(FieldError(REQUIRED, f"data[{key}]"))
            if kind != "kubernetes.io/tls":
                break
        elif kind in (DOCKER_CFG, DOCKER_CONFIG_JSON) and go_json_error(raw):
            errors_found.append(FieldError(INVALID, f"data[{key}]", REDACTED, go_json_error(raw)))
    return errors_found


def validate_secret(obj: dict, old: dict | None) -> list[FieldError]:
    found = metadata_name_errors(obj)
    total = 0
    for key in obj.get("data") or {}:
        found += config_key_errors("data", key)
        total += len(secret_bytes(obj, key) or b"")
    if total > MAX_SECRET_SIZE:
        detail = f"may not be more than {MAX_SECRET_SIZE} bytes"
        found.append(FieldError(TOO_LONG, "data", detail=detail))
    if old is not None:
        found = _update_errors(obj, old) + found
    return found + _type_errors(obj)


def _update_errors(obj: dict, old: dict) -> list[FieldError]:
    found = []
    if obj.get("type") != old.get("type"):
        found.append(FieldError(INVALID, "type", obj.get("type"), "field is immutable"))
    if old.get("immutable") is True:
        if obj.get("immutable") is not True:
            found.append(FieldError(FORBIDDEN, "immutable", detail=IMMUTABLE))
        if (obj.get("data") or {}) != (old.get("data") or {}):
            found.append(FieldError(FORBIDDEN, "data", detail=IMMUTABLE))
    return found
