"""What happens to a request body before it is stored: decoding, type and place checks,
`fieldValidation`, conversion to the storage form, defaults, validation, field ownership."""

from __future__ import annotations

import copy
import json
import re
import secrets
from typing import Any

from kubesim.base import errors, gojson, protobuf
from kubesim.base.http import Request
from kubesim.registry import patch
from kubesim.registry.apply import record_update
from kubesim.registry.kinds import find_kind

NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def api_version_of(target: Any) -> str:
    return target.kind.api_version(target.version)


def served(target: Any, stored: dict[str, Any]) -> dict[str, Any]:
    return target.kind.from_storage(stored, target.version)


# JSON of stored objects as served, by (uid, resourceVersion, version): a stored version never
# changes, so lists and watches encode each object once instead of converting it per request.
_ENCODED: dict[tuple[str, str, str], bytes] = {}
ENCODED_LIMIT = 20_000


def encoded(target: Any, stored: dict[str, Any], *, list_item: bool = False) -> bytes:
    """The object as served, JSON; `list_item`: as an item of a list, which carries no kind
    and apiVersion (the list says them once)."""
    meta = stored.get("metadata", {})
    version = api_version_of(target) + (" item" if list_item else "")
    key = (meta.get("uid", ""), meta.get("resourceVersion", ""), version)
    cached = _ENCODED.get(key)
    if cached is None:
        obj = served(target, stored)
        if list_item:
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
        cached = json.dumps(obj, separators=(",", ":")).encode()
        if key[0] and key[1]:
            if len(_ENCODED) >= ENCODED_LIMIT:
                _ENCODED.clear()
            _ENCODED[key] = cached
    return cached


# The media types a create or update body may come in (negotiation.NegotiateInputSerializer).
BODY_MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"


def body_media_type(request: Request) -> str:
    """The Content-Type of a create or update body (JSON when none is given); 415 otherwise."""
    media_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if media_type and media_type not in BODY_MEDIA_TYPES:
        raise errors.ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(BODY_MEDIA_TYPES),
        )
    return media_type or "application/json"


def decode_body(request: Request, target: Any) -> dict[str, Any]:
    media_type = body_media_type(request)
    obj: Any = None
    if media_type == "application/json":
        try:
            obj = gojson.loads(request.body, duplicates=request.duplicate_fields)
        except gojson.GoJsonError as error:
            raise _unrecognized(target, f"json parse error: {error}", request.body) from None
    elif media_type == protobuf.CONTENT_TYPE:
        try:
            obj = protobuf.decode_object(request.body)
        except ValueError:
            obj = None
    elif request.body:
        try:
            obj = patch.decode_yaml_or_json(request.body)
        except errors.ApiError:
            obj = None
    if not isinstance(obj, dict):
        raise _unrecognized(target, "json parse error", request.body)
    check_type(obj, target)
    return obj


def _unrecognized(target: Any, problem: str, body: bytes) -> errors.ApiError:
    """transformDecodeError's words for a body whose kind could not be read."""
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {target.kind.kind}): "
        f"couldn't get version/kind; {problem} ({_summary(body)})"
    )


def _summary(body: bytes, limit: int = 30) -> str:
    """The start of a body as summarizeData quotes it in a decoding error."""
    if not body:
        return "<empty>"
    if body[:1] == b"{":
        text = body[:limit].decode("utf-8", "replace")
        return text + " ..." if len(body) > limit else text
    return body[:limit].hex() + (" ..." if len(body) > limit else "")


def check_type(obj: dict[str, Any], target: Any) -> None:
    expected = api_version_of(target)
    sent = obj.setdefault("apiVersion", expected)
    kind = obj.setdefault("kind", target.kind.kind)
    _must_be_registered(str(sent), str(kind), target)
    if sent != expected:
        raise errors.bad_request(
            f"the API version in the data ({sent}) does not match the expected API version "
            f"({expected})"
        )
    if kind != target.kind.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({target.kind.kind})"
        )
    if not isinstance(obj.setdefault("metadata", {}), dict):
        raise errors.bad_request("metadata: must be an object")


def _must_be_registered(api_version: str, kind: str, target: Any) -> None:
    """The scheme decodes only kinds it knows in the version the data names."""
    group, _, version = api_version.rpartition("/")
    known_version = version == "v1" if not group else bool(version)
    if known_version and find_kind(group, kind.removesuffix("List")) is not None:
        return
    raise errors.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {target.kind.kind}: no kind '
        f'"{kind}" is registered for version "{api_version}" in scheme "{LEGACY_SCHEME}"'
    )


def field_validation(request: Request, obj: dict[str, Any], target: Any) -> list[str]:
    """Apply `fieldValidation`: Strict rejects unknown fields, Warn and Ignore drop them."""
    mode = request.query.get("fieldValidation", "Warn")
    if mode not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{mode}": supported values: '
            '"Ignore", "Strict", "Warn"'
        )
    unknown = target.kind.unknown_fields(obj, target.version, target.k8s_version)
    for path in unknown:
        _drop_path(obj, path)
    duplicates = request.duplicate_fields
    if not (unknown or duplicates) or mode == "Ignore":
        return []
    messages = [f'duplicate field "{path}"' for path in duplicates]
    messages += [f'unknown field "{path}"' for path in unknown]
    if mode == "Strict":
        kind, version = target.kind.kind, api_version_of(target).rpartition("/")[2]
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            f"strict decoding error: {', '.join(messages)}"
        )
    return messages


def _drop_path(obj: Any, path: str) -> None:
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]
    node = obj
    for part in parts[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def warning_headers(messages: list[str]) -> list[tuple[str, str]]:
    return [
        ("Warning", f'299 - "{message.replace(chr(34), chr(92) + chr(34))}"')
        for message in messages
    ]


def manager_name(request: Request) -> str:
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "unknown")
    return agent.split("/", 1)[0] or "unknown"


def dry_run(request: Request) -> bool:
    value = request.query.get("dryRun")
    if value not in (None, "All"):
        raise errors.bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return value == "All"


def namespace_must_accept(api: Any, target: Any, name: str) -> None:
    if not target.kind.namespaced:
        return
    namespace = api.store.get(api.namespace_kind, None, target.namespace)
    if namespace.get("metadata", {}).get("deletionTimestamp"):
        raise errors.namespace_terminating(
            target.kind.group, target.kind.plural, name, target.namespace
        )


def place(obj: dict[str, Any], target: Any) -> None:
    meta = obj["metadata"]
    if target.kind.namespaced:
        if meta.get("namespace") and meta["namespace"] != target.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = target.namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        suffix = "".join(secrets.choice(NAME_SUFFIX_ALPHABET) for _ in range(5))
        meta["name"] = f"{meta['generateName']}{suffix}"


def to_valid_storage(
    target: Any, obj: dict[str, Any], old: dict[str, Any] | None
) -> dict[str, Any]:
    """The storage form of a request object, defaulted and validated (422 when invalid)."""
    storage = target.kind.to_storage(obj, target.version)
    target.kind.apply_defaults(storage)
    if old is None:
        target.kind.admit_new(storage)
    problems = target.kind.validate(storage, old)
    if problems:
        name = storage.get("metadata", {}).get("name", "")
        raise errors.invalid(target.kind.group, target.kind.kind, name, problems)
    return storage


def track_update(
    target: Any,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    subresource: str = "",
) -> None:
    """Record `manager`'s changed fields in `new`, computed in the request's version."""
    old_served = served(target, old) if old else None
    new_served = served(target, new)
    api_version = api_version_of(target)
    record_update(
        old_served,
        new_served,
        manager=manager,
        api_version=api_version,
        subresource=subresource,
        reset=_reset_fields(target, old, subresource),
    )
    managed = new_served.get("metadata", {}).get("managedFields")
    if managed:
        new["metadata"]["managedFields"] = managed
    else:
        new["metadata"].pop("managedFields", None)


def _reset_fields(target: Any, old: dict[str, Any] | None, subresource: str) -> tuple[str, ...]:
    """Fields the strategy resets, which the field manager therefore never gives the writer:
    status on a main-resource write of a kind with a status subresource, spec and metadata on a
    status write; a new Namespace's spec.finalizers (set by PrepareForCreate)."""
    kind = target.kind
    if subresource == "status":
        return ("f:spec",)
    reset: tuple[str, ...] = ("f:status",) if "status" in kind.subresources else ()
    if kind.plural == "namespaces" and old is None:
        reset += ("f:spec",)
    return reset


def without_status(target: Any, obj: dict[str, Any]) -> dict[str, Any]:
    if "status" in target.kind.subresources and target.kind.plural != "namespaces":
        obj.pop("status", None)
    return obj


def merge_subresource(
    target: Any, old: dict[str, Any], new: dict[str, Any], subresource: str
) -> dict[str, Any]:
    """A status write changes only status; a main-resource write never changes status."""
    if "status" not in target.kind.subresources:
        return new
    if subresource == "status":
        merged = copy.deepcopy(old)
        merged["status"] = new.get("status", {})
        merged["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
        return merged
    merged = copy.deepcopy(new)
    if "status" in old:
        merged["status"] = copy.deepcopy(old["status"])
    else:
        merged.pop("status", None)
    return merged


def check_name(obj: dict[str, Any], target: Any) -> None:
    name = obj["metadata"].get("name")
    if name and name != target.name:
        raise errors.bad_request(
            f"the name of the object ({name}) does not match the name on the URL ({target.name})"
        )
    obj["metadata"]["name"] = target.name
