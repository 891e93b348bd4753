"""Just enough Kubernetes protobuf to read the review bodies kubectl sends that way
(`kubectl auth can-i`, `kubectl auth whoami` POST `application/vnd.kubernetes.protobuf`)."""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
RESOURCE_ATTRIBUTES = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
NON_RESOURCE_ATTRIBUTES = ("path", "verb")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> dict[int, list[Any]]:
    """Field number -> values (bytes for length-delimited fields, ints for varints)."""
    found: dict[int, list[Any]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            length, at = _varint(data, at)
            value, at = data[at : at + length], at + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, at = data[at : at + size], at + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        found.setdefault(number, []).append(value)
    return found


def _first(found: dict[int, list[Any]], number: int) -> bytes:
    values = found.get(number) or [b""]
    return values[0] if isinstance(values[0], bytes) else b""


def _strings(data: bytes, names: tuple[str, ...]) -> dict[str, str]:
    found = fields(data)
    return {name: _first(found, i + 1).decode() for i, name in enumerate(names) if found.get(i + 1)}


def decode_review(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf SelfSubjectAccessReview or SelfSubjectReview."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    envelope = fields(body[len(MAGIC) :])
    type_meta = fields(_first(envelope, 1))
    obj: dict[str, Any] = {
        "apiVersion": _first(type_meta, 1).decode(),
        "kind": _first(type_meta, 2).decode(),
        "metadata": {},
    }
    raw = fields(_first(envelope, 2))
    if obj["kind"] == "SelfSubjectAccessReview" and raw.get(2):
        spec = fields(_first(raw, 2))
        obj["spec"] = {}
        if spec.get(1):
            attributes = _strings(_first(spec, 1), RESOURCE_ATTRIBUTES)
            obj["spec"]["resourceAttributes"] = attributes
        if spec.get(2):
            attributes = _strings(_first(spec, 2), NON_RESOURCE_ATTRIBUTES)
            obj["spec"]["nonResourceAttributes"] = attributes
    return obj
