"""OpenAPI v3 documents generated from the upstream JSON schemas in `kubernetes-validate`.

kubectl reads `/openapi/v3`, then one group-version document, to learn that a PATCH
operation for the kind (`x-kubernetes-group-version-kind`) takes `fieldValidation`; it then
lets the server validate (`fieldValidation=Strict`). `kubectl explain` reads the schemas.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from kubesim.registry.validation import definition_name, schema_release, upstream_definitions

FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": "Strict, Warn or Ignore: what to do with unknown or duplicate fields.",
    "schema": {"type": "string", "uniqueItems": True},
}
PATCH_CONTENT_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def _definition_name(group: str, version: str, kind: str) -> str:
    return definition_name(group, version, kind)


def _to_openapi(schema: Any) -> Any:
    """JSON-schema spellings the upstream generator turned into; back to OpenAPI 3.0."""
    if isinstance(schema, list):
        return [_to_openapi(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _to_openapi(value) for key, value in schema.items()}
    if isinstance(converted.get("type"), list):
        types = [t for t in converted["type"] if t != "null"]
        converted["type"] = types[0] if len(types) == 1 else None
        if converted["type"] is None:
            del converted["type"]
    if isinstance(converted.get("$ref"), str):
        converted["$ref"] = converted["$ref"].replace("#/$defs/", "#/components/schemas/")
    if isinstance(converted.get("enum"), list):
        converted["enum"] = [value for value in converted["enum"] if value is not None]
    return converted


def _closure(definitions: dict[str, Any], names: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    pending = [name for name in names if name in definitions]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found[name] = definitions[name]
        text = json.dumps(definitions[name])
        for ref in text.split('"#/$defs/')[1:]:
            pending.append(ref.split('"', 1)[0])
    return {name: _to_openapi(schema) for name, schema in sorted(found.items())}


def _operation(kind: Any, version: str, action: str, ref: dict[str, str]) -> dict[str, Any]:
    gvk = {"group": kind.group, "version": version, "kind": kind.kind}
    operation: dict[str, Any] = {
        "operationId": f"{action}{kind.kind}",
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref}}}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if action in ("patch", "put", "post"):
        operation["parameters"] = [FIELD_VALIDATION]
    if action == "patch":
        content = {
            content_type: {"schema": {"type": "object"}} for content_type in PATCH_CONTENT_TYPES
        }
        operation["requestBody"] = {"content": content, "required": True}
    return operation


def _paths(group: str, version: str, kinds: list[Any]) -> dict[str, Any]:
    prefix = f"/apis/{group}/{version}" if group else "/api/v1"
    paths: dict[str, Any] = {}
    for kind in kinds:
        ref = {"$ref": f"#/components/schemas/{_definition_name(group, version, kind.kind)}"}
        scope = f"{prefix}/namespaces/{{namespace}}" if kind.namespaced else prefix
        paths[f"{scope}/{kind.plural}"] = {
            "get": _operation(kind, version, "list", ref),
            "post": _operation(kind, version, "post", ref),
        }
        paths[f"{scope}/{kind.plural}/{{name}}"] = {
            action: _operation(kind, version, action, ref)
            for action in ("get", "put", "patch", "delete")
        }
    return paths


@functools.cache
def _group_version_document(
    release: str, group: str, version: str, kinds: tuple[Any, ...]
) -> dict[str, Any]:
    definitions = upstream_definitions(release)
    names = [_definition_name(group, version, kind.kind) for kind in kinds]
    names += [f"{name}List" for name in names]
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": release},
        "paths": _paths(group, version, list(kinds)),
        "components": {"schemas": _closure(definitions, names)},
    }


def _group_versions(api: Any) -> list[tuple[str, str]]:
    return [("", "v1")] + [(group, v) for group, vs in api.group_versions().items() for v in vs]


def _url_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else "api/v1"


def _index(api: Any) -> dict[str, Any]:
    paths = {}
    for group, version in _group_versions(api):
        path = _url_path(group, version)
        digest = hashlib.sha256(f"{api.k8s_version}/{path}".encode()).hexdigest()[:32].upper()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def document(api: Any, parts: list[str]) -> dict[str, Any] | None:
    """The document at /openapi/<parts>, or None (plain 404) when there is none."""
    if parts[:1] != ["v3"]:
        return None
    if parts == ["v3"]:
        return _index(api)
    wanted = "/".join(parts[1:])
    for group, version in _group_versions(api):
        if _url_path(group, version) == wanted:
            kinds = tuple(sorted(api.kinds_in(group), key=lambda kind: kind.plural))
            release = schema_release(version, api.k8s_version)
            return _group_version_document(release, group, version, kinds)
    return None
