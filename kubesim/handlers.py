"""The verbs on one resource: create, get, list, update, patch, delete, deletecollection."""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
from typing import Any

from kubesim import errors, patch
from kubesim.apply import record_update, server_side_apply
from kubesim.selectors import field_matcher, label_matcher
from kubesim.server import Request, Response, json_response

# Kinds whose DELETE answers with the object rather than a Status (registry ReturnDeletedObject).
RETURNS_DELETED_OBJECT = {"pods", "resourceclaims", "namespaces"}
NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def api_version_of(target: Any) -> str:
    return target.kind.api_version(target.version)


def served(target: Any, stored: dict[str, Any]) -> dict[str, Any]:
    return target.kind.from_storage(stored, target.version)


def decode_body(request: Request, target: Any) -> dict[str, Any]:
    try:
        obj = patch.decode_yaml_or_json(request.body) if request.body else None
    except errors.ApiError:
        obj = None
    if not isinstance(obj, dict):
        kind = target.kind.kind
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {kind}): "
            "couldn't get version/kind; json parse error"
        )
    _check_type(obj, target)
    return obj


def _check_type(obj: dict[str, Any], target: Any) -> None:
    expected = api_version_of(target)
    sent = obj.setdefault("apiVersion", expected)
    if sent != expected:
        raise errors.bad_request(
            f"the API version in the data ({sent}) does not match the expected API version "
            f"({expected})"
        )
    kind = obj.setdefault("kind", target.kind.kind)
    if kind != target.kind.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({target.kind.kind})"
        )
    if not isinstance(obj.setdefault("metadata", {}), dict):
        raise errors.bad_request("metadata: must be an object")


def field_validation(request: Request, obj: dict[str, Any], target: Any) -> list[str]:
    """Apply `fieldValidation`: Strict rejects unknown fields, Warn and Ignore drop them."""
    mode = request.query.get("fieldValidation", "Warn")
    if mode not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{mode}": supported values: '
            '"Ignore", "Strict", "Warn"'
        )
    unknown = target.kind.unknown_fields(obj, target.version)
    for path in unknown:
        _drop_path(obj, path)
    if not unknown or mode == "Ignore":
        return []
    messages = [f'unknown field "{path}"' for path in unknown]
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


def _namespace_must_accept(api: Any, target: Any, name: str) -> None:
    if not target.kind.namespaced:
        return
    namespace = api.store.get(api.namespace_kind, None, target.namespace)
    if namespace.get("metadata", {}).get("deletionTimestamp"):
        raise errors.ApiError(
            403,
            "Forbidden",
            f'{errors.qualified(target.kind.group, target.kind.plural)} "{name}" is forbidden: '
            f"unable to create new content in namespace {target.namespace} because it is "
            "being terminated",
            {"name": name, "kind": target.kind.plural},
        )


def _place(obj: dict[str, Any], target: Any) -> None:
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
        old_served, new_served, manager=manager, api_version=api_version, subresource=subresource
    )
    managed = new_served.get("metadata", {}).get("managedFields")
    if managed:
        new["metadata"]["managedFields"] = managed
    else:
        new["metadata"].pop("managedFields", None)


def _without_status(target: Any, obj: dict[str, Any]) -> dict[str, Any]:
    if "status" in target.kind.subresources and target.kind.plural != "namespaces":
        obj.pop("status", None)
    return obj


def create(api: Any, request: Request, target: Any) -> Response:
    obj = decode_body(request, target)
    warnings = field_validation(request, obj, target)
    _place(obj, target)
    _namespace_must_accept(api, target, obj["metadata"].get("name") or "")
    storage = to_valid_storage(target, _without_status(target, obj), None)
    track_update(target, None, storage, manager_name(request))
    if dry_run(request):
        return json_response(201, served(target, storage), warning_headers(warnings))
    stored = api.store.create(target.kind, storage)
    return json_response(201, served(target, stored), warning_headers(warnings))


def get(api: Any, request: Request, target: Any) -> Response:
    stored = api.store.get(target.kind, target.namespace, target.name, copy=False)
    return json_response(200, served(target, stored))


def _continue_token(rv: int, last_key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "/".join(last_key) + "\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _continue_start(token: str) -> str:
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request("continue key is not valid: illegal base64 data") from None


def selected_items(api: Any, request: Request, target: Any) -> tuple[list[dict[str, Any]], int]:
    labels = label_matcher(request.query.get("labelSelector"))
    fields = field_matcher(request.query.get("fieldSelector"), target.kind.field_selectors)
    return api.store.list(target.kind, target.namespace, labels, fields, copy=False)


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def _page(request: Request, items: list[dict[str, Any]], rv: int) -> tuple[list, dict]:
    items = sorted(items, key=_key)
    start = request.query.get("continue")
    if start:
        begin = _continue_start(start)
        items = [item for item in items if _key(item) >= begin]
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    limit = int(request.query.get("limit") or 0) if request.query.get("limit", "0").isdigit() else 0
    if limit and len(items) > limit:
        last = items[limit - 1]["metadata"]
        meta["continue"] = _continue_token(rv, (last.get("namespace") or "", last["name"]))
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta


def list_objects(api: Any, request: Request, target: Any) -> Response:
    items, rv = selected_items(api, request, target)
    items, meta = _page(request, items, rv)
    body = {
        "kind": f"{target.kind.kind}List",
        "apiVersion": api_version_of(target),
        "metadata": meta,
        "items": [served(target, item) for item in items],
    }
    return json_response(200, body)


def _merge_subresource(
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


def _check_name(obj: dict[str, Any], target: Any) -> None:
    name = obj["metadata"].get("name")
    if name and name != target.name:
        raise errors.bad_request(
            f"the name of the object ({name}) does not match the name on the URL ({target.name})"
        )
    obj["metadata"]["name"] = target.name


def save(
    api: Any, request: Request, target: Any, old: dict[str, Any], new_served: dict[str, Any]
) -> dict[str, Any]:
    """Validate and store a changed object (given in the request's version)."""
    subresource = target.subresource or ""
    sent_rv = new_served.get("metadata", {}).get("resourceVersion")
    if sent_rv and sent_rv != old["metadata"].get("resourceVersion"):
        raise errors.conflict(target.kind.group, target.kind.plural, target.name)
    old_served = served(target, old)
    new_served = _merge_subresource(target, old_served, new_served, subresource)
    storage = to_valid_storage(target, new_served, old)
    track_update(target, old, storage, manager_name(request), subresource)
    if dry_run(request):
        return storage
    return api.store.update(target.kind, storage)


def update(api: Any, request: Request, target: Any) -> Response:
    obj = decode_body(request, target)
    warnings = field_validation(request, obj, target)
    _check_name(obj, target)
    _place(obj, target)
    old = api.store.get(target.kind, target.namespace, target.name)
    stored = save(api, request, target, old, obj)
    return json_response(200, served(target, stored), warning_headers(warnings))


def _patch_options(request: Request, content_type: str) -> tuple[str, bool]:
    force = request.query.get("force")
    if content_type == patch.APPLY_PATCH:
        manager = request.query.get("fieldManager")
        if not manager:
            raise errors.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch",
            )
        return manager, request.flag("force")
    if force is not None:
        raise errors.ApiError(
            422,
            "Invalid",
            'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified '
            "for non-apply patch",
        )
    return manager_name(request), False


def patch_object(api: Any, request: Request, target: Any) -> Response:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type not in patch.PATCH_TYPES:
        raise errors.unsupported_media_type(content_type)
    manager, force = _patch_options(request, content_type)
    body = patch.decode_patch(content_type, request.body)
    if content_type == patch.APPLY_PATCH:
        return _apply(api, request, target, body, manager, force)
    old = api.store.get(target.kind, target.namespace, target.name)
    patched = patch.apply_patch(content_type, served(target, old), body)
    if not isinstance(patched, dict):
        raise errors.bad_request("the patch produced something that is not an object")
    _check_type(patched, target)
    warnings = field_validation(request, patched, target)
    _check_name(patched, target)
    _place(patched, target)
    stored = save(api, request, target, old, patched)
    return json_response(200, served(target, stored), warning_headers(warnings))


def _apply(
    api: Any, request: Request, target: Any, body: Any, manager: str, force: bool
) -> Response:
    if not isinstance(body, dict):
        raise errors.bad_request("error decoding YAML: the apply patch must be an object")
    _check_type(body, target)
    warnings = field_validation(request, body, target)
    _check_name(body, target)
    _place(body, target)
    subresource = target.subresource or ""
    old = _get_or_none(api, target)
    live = served(target, old) if old else None
    if live is None and subresource:
        raise errors.not_found(target.kind.group, target.kind.plural, target.name)
    result = server_side_apply(
        live,
        body,
        manager=manager,
        force=force,
        api_version=api_version_of(target),
        subresource=subresource,
    )
    headers = warning_headers(warnings)
    if old is None:
        _namespace_must_accept(api, target, target.name)
        storage = to_valid_storage(target, _without_status(target, result), None)
        stored = storage if dry_run(request) else api.store.create(target.kind, storage)
        return json_response(201, served(target, stored), headers)
    storage = to_valid_storage(target, _merge_subresource(target, live, result, subresource), old)
    stored = storage if dry_run(request) else api.store.update(target.kind, storage)
    return json_response(200, served(target, stored), headers)


def _get_or_none(api: Any, target: Any) -> dict[str, Any] | None:
    try:
        return api.store.get(target.kind, target.namespace, target.name)
    except errors.ApiError as error:
        if error.code == 404:
            return None
        raise


def _delete_options(request: Request) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        options = json.loads(request.body)
    except ValueError:
        raise errors.bad_request("invalid DeleteOptions body") from None
    return options if isinstance(options, dict) else {}


def _success(target: Any, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    details = {"name": meta.get("name", "")}
    if target.kind.group:
        details["group"] = target.kind.group
    details |= {"kind": target.kind.plural, "uid": meta.get("uid", "")}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def delete_one(api: Any, request: Request, target: Any) -> dict[str, Any]:
    """Delete (or with finalizers, mark for deletion) one object; returns it."""
    options = _delete_options(request)
    old = api.store.get(target.kind, target.namespace, target.name)
    expected_uid = (options.get("preconditions") or {}).get("uid")
    if expected_uid and expected_uid != old["metadata"].get("uid"):
        raise errors.conflict(target.kind.group, target.kind.plural, target.name)
    if dry_run(request) or "All" in (options.get("dryRun") or []):
        return old
    if target.kind.plural == "namespaces":
        return api.terminate_namespace(target.name)
    return api.store.delete(target.kind, target.namespace, target.name)


def delete(api: Any, request: Request, target: Any) -> Response:
    deleted = delete_one(api, request, target)
    if target.kind.plural in RETURNS_DELETED_OBJECT or deleted["metadata"].get("deletionTimestamp"):
        return json_response(200, served(target, deleted))
    return json_response(200, _success(target, deleted))


def delete_collection(api: Any, request: Request, target: Any) -> Response:
    items, _ = selected_items(api, request, target)
    deleted = []
    for item in items:
        one = copy.copy(target)
        one.name = item["metadata"]["name"]
        one.namespace = item["metadata"].get("namespace") or None
        deleted.append(served(target, delete_one(api, request, one)))
    body = {
        "kind": f"{target.kind.kind}List",
        "apiVersion": api_version_of(target),
        "metadata": {"resourceVersion": str(api.store.resource_version)},
        "items": deleted,
    }
    return json_response(200, body)
