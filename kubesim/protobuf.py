"""Just enough Kubernetes protobuf to read the bodies kubectl sends that way: the review
bodies of `kubectl auth can-i` and `kubectl auth whoami`, and the Namespace of
`kubectl create namespace` (POST `application/vnd.kubernetes.protobuf`). Every body is the
magic `k8s\0` followed by a runtime.Unknown: typeMeta (1), raw (2), contentEncoding (3),
contentType (4)."""

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


def _envelope(body: bytes) -> tuple[str, str, bytes]:
    """apiVersion, kind and the raw object bytes of a runtime.Unknown body."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    envelope = fields(body[len(MAGIC) :])
    type_meta = fields(_first(envelope, 1))
    return _first(type_meta, 1).decode(), _first(type_meta, 2).decode(), _first(envelope, 2)


def decode_review(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf SelfSubjectAccessReview or SelfSubjectReview."""
    api_version, kind, raw_bytes = _envelope(body)
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {}}
    raw = fields(raw_bytes)
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


# ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto): the fields a client sets.
META_STRINGS = {1: "name", 2: "generateName", 3: "namespace"}
META_MAPS = {11: "labels", 12: "annotations"}
META_FINALIZERS = 14


def _object_meta(data: bytes) -> dict[str, Any]:
    found = fields(data)
    meta: dict[str, Any] = {
        name: _first(found, number).decode()
        for number, name in META_STRINGS.items()
        if found.get(number)
    }
    for number, name in META_MAPS.items():
        if found.get(number):
            entries = [fields(entry) for entry in found[number]]
            meta[name] = {_first(e, 1).decode(): _first(e, 2).decode() for e in entries}
    if found.get(META_FINALIZERS):
        meta["finalizers"] = [value.decode() for value in found[META_FINALIZERS]]
    return meta


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf object body; only a v1 Namespace (metadata and
    spec.finalizers) is understood, any other kind raises ValueError."""
    api_version, kind, raw = _envelope(body)
    if (api_version, kind) != ("v1", "Namespace"):
        raise ValueError(f"protobuf bodies of {api_version} {kind} are not supported")
    found = fields(raw)
    obj: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _object_meta(_first(found, 1)),
    }
    spec = fields(_first(found, 2))
    if spec.get(1):
        obj["spec"] = {"finalizers": [value.decode() for value in spec[1]]}
    return obj
