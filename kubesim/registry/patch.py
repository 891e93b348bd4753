"""The patch formats of the API server: JSON patch, JSON merge patch, strategic merge patch."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from kubesim.base import errors

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
# A custom resource has no Go struct to merge strategically by (apiextensions' crdHandler).
CUSTOM_RESOURCE_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)

# patchMergeKey of the list fields we serve, by field name (core/v1 and resource.k8s.io).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "resourceClaims": "name",
    "claims": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "reservedFor": "uid",
    "conditions": "type",
    "ownerReferences": "uid",
}
# Lists of scalars that strategic merge treats as sets rather than replacing.
MERGED_SCALAR_LISTS = ("finalizers",)

DIRECTIVE = "$patch"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    """Strategic merge patch as kubectl sends it (merge keys, `$patch`, `$setElementOrder`)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get(DIRECTIVE) == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != DIRECTIVE}
    if patch.get(DIRECTIVE) == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
        elif key.startswith("$") or key == DIRECTIVE:
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = strategic_merge(result.get(key), value)
    _apply_element_order(result, patch)
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current = current if isinstance(current, list) else []
    if field in MERGED_SCALAR_LISTS:
        return current + [item for item in patch if item not in current]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return copy.deepcopy(patch)
    if any(item.get(DIRECTIVE) == "replace" for item in patch):
        return [
            {k: v for k, v in item.items() if k != DIRECTIVE}
            for item in patch
            if item.get(DIRECTIVE) != "replace"
        ]
    merged = list(current)
    for item in patch:
        index = _index_of(merged, merge_key, item.get(merge_key))
        if item.get(DIRECTIVE) == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(strategic_merge({}, item))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


def _index_of(items: list[Any], key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get(key) == value:
            return index
    return None


def _apply_element_order(result: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, order in patch.items():
        if not key.startswith("$setElementOrder/"):
            continue
        field = key.split("/", 1)[1]
        items = result.get(field)
        merge_key = MERGE_KEYS.get(field)
        if not isinstance(items, list) or not isinstance(order, list):
            continue
        wanted = [_identity(entry, merge_key) for entry in order]
        result[field] = sorted(
            items, key=functools.partial(_rank, wanted=wanted, merge_key=merge_key)
        )


def _identity(item: Any, merge_key: str | None) -> Any:
    return item.get(merge_key) if merge_key and isinstance(item, dict) else item


def _rank(item: Any, wanted: list[Any], merge_key: str | None) -> int:
    value = _identity(item, merge_key)
    return wanted.index(value) if value in wanted else len(wanted)


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        message = "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        raise errors.bad_request(message)
    document = copy.deepcopy(target)
    for operation in operations:
        document = _apply_operation(document, operation)
    return document


def _apply_operation(document: Any, operation: Any) -> Any:
    if not isinstance(operation, dict) or "op" not in operation:
        raise errors.bad_request("the server rejected our request due to an error in our request")
    op, path = operation["op"], _pointer(operation.get("path", ""))
    if op == "add":
        return _put(document, path, copy.deepcopy(operation.get("value")), insert=True)
    if op == "remove":
        return _remove(document, path)
    if op == "replace":
        _resolve(document, path)
        return _put(document, path, copy.deepcopy(operation.get("value")), insert=False)
    if op in ("move", "copy"):
        source = _pointer(operation.get("from", ""))
        value = copy.deepcopy(_resolve(document, source))
        if op == "move":
            document = _remove(document, source)
        return _put(document, path, value, insert=True)
    if op == "test":
        if _resolve(document, path) != operation.get("value"):
            raise errors.ApiError(422, "Invalid", f"testing value {operation.get('path')} failed")
        return document
    raise errors.bad_request(f"Unexpected kind: {op}")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise errors.bad_request(f"JSON pointer must start with '/': {path}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _missing(path: list[str]) -> errors.ApiError:
    return errors.ApiError(
        422, "Invalid", f"the server rejected our request: missing path /{'/'.join(path)}"
    )


def _resolve(document: Any, path: list[str]) -> Any:
    node = document
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _missing(path)
    return node


def _put(document: Any, path: list[str], value: Any, *, insert: bool) -> Any:
    if not path:
        return value
    parent = _resolve(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = len(parent) if last == "-" else int(last) if last.isdigit() else -1
        if index < 0 or index > len(parent) or (not insert and index == len(parent)):
            raise _missing(path)
        if insert:
            parent.insert(index, value)
        else:
            parent[index] = value
    else:
        raise _missing(path)
    return document


def _remove(document: Any, path: list[str]) -> Any:
    if not path:
        raise _missing(path)
    parent = _resolve(document, path[:-1])
    _resolve(document, path)
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(int(path[-1]))
    return document


def decode_patch(content_type: str, body: bytes) -> Any:
    if content_type == APPLY_PATCH:
        return decode_yaml_or_json(body)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from None


def decode_yaml_or_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(body)
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"error decoding YAML: {exc}") from None


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    if content_type == JSON_PATCH:
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        message = "json: cannot unmarshal array into Go value of type map[string]interface {}"
        raise errors.bad_request(message)
    if content_type == MERGE_PATCH:
        return merge_patch(target, patch)
    return strategic_merge(target, patch)
