"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), as kubectl
sends them: the reviews of `kubectl auth can-i|whoami` and the objects of `kubectl create
namespace|serviceaccount|role|secret|deployment|token|...`, read with the field numbers of
upstream's generated.proto (protobuf_messages.json). Every body is the magic `k8s\0`
followed by a runtime.Unknown: typeMeta (1), raw (2), contentEncoding (3), contentType (4)."""

from __future__ import annotations

import base64
import datetime
import functools
import json
import struct
from pathlib import Path
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


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


def _envelope(body: bytes) -> tuple[str, str, bytes]:
    """apiVersion, kind and the raw object bytes of a runtime.Unknown body."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    envelope = fields(body[len(MAGIC) :])
    type_meta = fields(_first(envelope, 1))
    return _first(type_meta, 1).decode(), _first(type_meta, 2).decode(), _first(envelope, 2)


MESSAGES_FILE = Path(__file__).with_name("protobuf_messages.json")
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
# The messages whose JSON form is not an object of their fields.
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW = ("k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1")
TIMES = {META + "Time": "%Y-%m-%dT%H:%M:%SZ", META + "MicroTime": "%Y-%m-%dT%H:%M:%S.%fZ"}


@functools.cache
def messages() -> dict[str, dict[str, list[str]]]:
    """Message -> field number -> [JSON name, type, label], from upstream's generated.proto
    (written by protobuf_messages_from_proto)."""
    loaded: dict[str, dict[str, list[str]]] = json.loads(MESSAGES_FILE.read_text())
    return loaded


def message_for(api_version: str, kind: str) -> str:
    """The protobuf message of a kind: k8s.io.api.<first label of the group>.<version>.<kind>."""
    group, _, version = api_version.rpartition("/")
    return f"k8s.io.api.{group.split('.')[0] or 'core'}.{version}.{kind}"


def _scalar(value: int | bytes, type_name: str) -> Any:
    if type_name == "string":
        return value.decode() if isinstance(value, bytes) else None
    if type_name == "bytes":
        return base64.b64encode(value).decode() if isinstance(value, bytes) else None
    if type_name == "bool":
        return bool(value)
    if type_name == "double" and isinstance(value, bytes):
        return struct.unpack("<d", value)[0]
    if isinstance(value, int):
        return value - (1 << 64) if value >= 1 << 63 else value
    raise ValueError(f"a {type_name} field with the wrong wire type")


def _special(data: bytes, type_name: str) -> Any:
    found = fields(data)
    if type_name == QUANTITY:
        return _first(found, 1).decode()
    if type_name == INT_OR_STRING:
        is_string = (found.get(1) or [0])[0] == 1
        return _first(found, 3).decode() if is_string else _scalar((found.get(2) or [0])[0], "int")
    if type_name in RAW:
        return json.loads(_first(found, 1) or b"null")
    seconds, nanos = (found.get(1) or [0])[0], (found.get(2) or [0])[0]
    if not seconds and not nanos:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.replace(microsecond=nanos // 1000).strftime(TIMES[type_name])


def _value(value: int | bytes, type_name: str) -> Any:
    if type_name not in messages() and type_name not in TIMES:
        return _scalar(value, type_name)
    if not isinstance(value, bytes):
        raise ValueError(f"a {type_name} field with the wrong wire type")
    if type_name in TIMES or type_name in (QUANTITY, INT_OR_STRING, *RAW):
        return _special(value, type_name)
    return decode_message(value, type_name)


def decode_message(data: bytes, type_name: str) -> dict[str, Any]:
    """The JSON form Go would print of a protobuf message. Empty strings and zero times are
    left out (omitempty); a field number the message does not have raises ValueError."""
    obj: dict[str, Any] = {}
    known = messages()[type_name]
    for number, values in fields(data).items():
        if str(number) not in known:
            raise ValueError(f"{type_name} has no field {number}")
        name, field_type, label = known[str(number)]
        if label == "map":
            entries = [fields(entry) for entry in values]
            obj[name] = {
                _first(e, 1).decode(): _value((e.get(2) or [b""])[0], field_type) for e in entries
            }
        elif label == "repeated":
            obj[name] = [_value(value, field_type) for value in values]
        elif label == "inline":
            obj.update(_value(values[-1], field_type))
        elif (decoded := _value(values[-1], field_type)) not in (None, ""):
            obj[name] = decoded
    return obj


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf object body of any kind in protobuf_messages.json;
    ValueError for any other kind or a body that does not fit its message."""
    api_version, kind, raw = _envelope(body)
    type_name = message_for(api_version, kind)
    if type_name not in messages():
        raise ValueError(f"protobuf bodies of {api_version} {kind} are not supported")
    return {"apiVersion": api_version, "kind": kind, **decode_message(raw, type_name)}
