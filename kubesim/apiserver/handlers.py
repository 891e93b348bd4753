"""The verbs on one resource: create, get, list, update, patch, delete, deletecollection."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

from kubesim.apiserver import tables
from kubesim.apiserver.listing import selected_items
from kubesim.base import errors
from kubesim.base.http import Request, Response, json_response
from kubesim.controllers import garbage
from kubesim.registry import graceful, patch
from kubesim.registry.admission import (
    api_version_of,
    check_name,
    check_type,
    decode_body,
    dry_run,
    encoded,
    field_validation,
    manager_name,
    merge_subresource,
    namespace_must_accept,
    place,
    served,
    to_valid_storage,
    track_update,
    warning_headers,
    without_status,
)
from kubesim.registry.apply import server_side_apply
from kubesim.registry.dry_run import would_create
from kubesim.registry.validation import FORBIDDEN, REQUIRED, FieldError

# Kinds whose DELETE answers with the object rather than a Status (registry ReturnDeletedObject).
RETURNS_DELETED_OBJECT = {"pods", "resourceclaims", "namespaces"}
# What a route produces (installer.go): every verb the serializers' media types, a list (which
# also watches) their streaming forms too.
PRODUCES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
LIST_PRODUCES = (
    *PRODUCES,
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
)


def _media_types(header: str) -> list[str]:
    return [part.split(";")[0].strip() for part in header.split(",")]


def negotiate(request: Request, verb: str) -> None:
    """go-restful's route selection after path and method: a PATCH route consumes only the
    patch types (415), every route produces only its media types (406)."""
    if request.method == "PATCH":
        content_type = request.headers.get("Content-Type") or "application/octet-stream"
        if not set(_media_types(content_type)) & set(patch.PATCH_TYPES):
            raise errors.unsupported_media_type()
    produces = LIST_PRODUCES if verb in ("list", "watch") else PRODUCES
    accepted = _media_types(request.headers.get("Accept") or "*/*")
    if "*/*" not in accepted and not set(accepted) & set(produces):
        raise errors.not_acceptable(produces)


def create(api: Any, request: Request, target: Any) -> Response:
    obj = decode_body(request, target)
    warnings = field_validation(request, obj, target)
    place(obj, target)
    namespace_must_accept(api, target, obj["metadata"].get("name") or "")
    sent = without_status(target, obj)
    storage = to_valid_storage(target, sent, None)
    _record_creator(target, sent, storage, manager_name(request))
    warnings += api.admit_write(request, target, storage)
    with api.admitting(target.kind, storage):  # the quota admission, last as upstream
        if dry_run(request):
            would_be = would_create(api, target, storage)
            return json_response(201, served(target, would_be), warning_headers(warnings))
        stored = api.store.create(target.kind, storage)
    return json_response(201, served(target, stored), warning_headers(warnings))


def _record_creator(target: Any, sent: dict, storage: dict, manager: str) -> None:
    """The creator's managedFields, from the object as decoded and defaulted: the field
    manager runs before mutating admission (ServiceAccount, Priority, ...)."""
    as_decoded = target.kind.to_storage(sent, target.version)
    target.kind.apply_decoding_defaults(as_decoded)
    track_update(target, None, as_decoded, manager)
    managed = as_decoded["metadata"].get("managedFields")
    if managed:
        storage["metadata"]["managedFields"] = managed
    else:
        storage["metadata"].pop("managedFields", None)


def get(api: Any, request: Request, target: Any) -> Response:
    stored = api.store.get(target.kind, target.namespace, target.name, copy=False)
    if tables.wanted(request):
        obj = served(target, stored)
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        return json_response(200, tables.table(target.kind.plural, [obj], request, meta))
    return Response(200, encoded(target, stored))


def save(
    api: Any, request: Request, target: Any, old: dict[str, Any], new_served: dict[str, Any]
) -> dict[str, Any]:
    """Validate and store a changed object (given in the request's version)."""
    subresource = target.subresource or ""
    sent_rv = new_served.get("metadata", {}).get("resourceVersion")
    if sent_rv and sent_rv != old["metadata"].get("resourceVersion"):
        raise errors.conflict(target.kind.group, target.kind.plural, target.name, by_client=True)
    old_served = served(target, old)
    new_served = merge_subresource(target, old_served, new_served, subresource)
    storage = to_valid_storage(target, new_served, old)
    track_update(target, old, storage, manager_name(request), subresource)
    api.admit_write(request, target, storage)
    if dry_run(request):
        return storage
    return api.store.update(target.kind, storage)


def update(api: Any, request: Request, target: Any) -> Response:
    obj = decode_body(request, target)
    warnings = field_validation(request, obj, target)
    check_name(obj, target)
    place(obj, target)
    old = api.store.get(target.kind, target.namespace, target.name)
    stored = save(api, request, target, old, obj)
    return json_response(200, served(target, stored), warning_headers(warnings))


def _patch_options(request: Request, content_type: str) -> tuple[str, bool]:
    force = request.query.get("force")
    if content_type == patch.APPLY_PATCH:
        manager = request.query.get("fieldManager")
        if not manager:
            required = FieldError(REQUIRED, "fieldManager", detail="is required for apply patch")
            raise errors.invalid("meta.k8s.io", "PatchOptions", "", [required])
        return manager, request.flag("force")
    if force is not None:
        detail = "may not be specified for non-apply patch"
        raise errors.invalid(
            "meta.k8s.io", "PatchOptions", "", [FieldError(FORBIDDEN, "force", detail=detail)]
        )
    return manager_name(request), False


def patch_object(api: Any, request: Request, target: Any) -> Response:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type not in patch.PATCH_TYPES:
        raise errors.unsupported_media_type()
    if content_type == patch.STRATEGIC_MERGE_PATCH and getattr(target.kind, "custom", False):
        raise errors.unsupported_patch_type(patch.CUSTOM_RESOURCE_PATCH_TYPES)
    manager, force = _patch_options(request, content_type)
    body = patch.decode_patch(content_type, request.body)
    if content_type == patch.APPLY_PATCH:
        return _retry_on_conflict(lambda: _apply(api, request, target, body, manager, force))
    return _retry_on_conflict(lambda: _patch(api, request, target, content_type, body))


def _retry_on_conflict(attempt: Callable[[], Response], seconds: float = 10.0) -> Response:
    """A patch applies to whatever is stored, like the API server's GuaranteedUpdate loop:
    when a controller wrote the object meanwhile, patch the newer version again, until the
    request's time is up (upstream retries until its context deadline, not a fixed count).
    A patch that itself names a stale resourceVersion still gets the 409."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return attempt()
        except errors.ApiError as error:
            own_conflict = "causes" in error.details or error.sent_by_client
            if error.reason != "Conflict" or own_conflict or time.monotonic() > deadline:
                raise


def _admit_sent_object(request: Request, obj: dict, target: Any) -> list[str]:
    """Check kind, fields and name of what the client sent, put it in the target's namespace;
    the warnings of fieldValidation come back."""
    check_type(obj, target)
    warnings = field_validation(request, obj, target)
    check_name(obj, target)
    place(obj, target)
    return warnings


def _patch(api: Any, request: Request, target: Any, content_type: str, body: Any) -> Response:
    old = api.store.get(target.kind, target.namespace, target.name)
    patched = patch.apply_patch(content_type, served(target, old), body)
    if not isinstance(patched, dict):
        raise errors.bad_request("the patch produced something that is not an object")
    warnings = _admit_sent_object(request, patched, target)
    stored = save(api, request, target, old, patched)
    return json_response(200, served(target, stored), warning_headers(warnings))


def _apply(
    api: Any, request: Request, target: Any, body: Any, manager: str, force: bool
) -> Response:
    if not isinstance(body, dict):
        raise errors.bad_request("error decoding YAML: the apply patch must be an object")
    warnings = _admit_sent_object(request, body, target)
    subresource = target.subresource or ""
    old = _get_or_none(api, target)
    sent_rv = body["metadata"].get("resourceVersion")
    if old and sent_rv and sent_rv != old["metadata"].get("resourceVersion"):
        raise errors.conflict(target.kind.group, target.kind.plural, target.name, by_client=True)
    live = served(target, old) if old is not None else None
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
    if live is None:
        namespace_must_accept(api, target, target.name)
        storage = to_valid_storage(target, without_status(target, result), None)
        headers = warning_headers(warnings + api.admit_write(request, target, storage))
        with api.admitting(target.kind, storage):
            if dry_run(request):
                stored = would_create(api, target, storage)
            else:
                stored = api.store.create(target.kind, storage)
        return json_response(201, served(target, stored), headers)
    storage = to_valid_storage(target, merge_subresource(target, live, result, subresource), old)
    api.admit_write(request, target, storage)
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


def _check_preconditions(target: Any, preconditions: dict[str, Any], meta: dict[str, Any]) -> None:
    """DeleteOptions.preconditions: the uid first, then the resourceVersion (rest.BeforeDelete)."""
    group, kind = target.kind.group, target.kind.kind
    expected_uid, stored_uid = preconditions.get("uid"), meta.get("uid", "")
    if expected_uid and expected_uid != stored_uid:
        raise errors.uid_precondition_failed(group, kind, target.name, expected_uid, stored_uid)
    expected_rv, stored_rv = preconditions.get("resourceVersion"), meta.get("resourceVersion", "")
    if expected_rv and expected_rv != stored_rv:
        raise errors.resource_version_precondition_failed(
            group, kind, target.name, expected_rv, stored_rv
        )


def delete_one(api: Any, request: Request, target: Any) -> dict[str, Any]:
    """Delete (or with finalizers, mark for deletion) one object; returns it."""
    options = _delete_options(request)
    old = api.store.get(target.kind, target.namespace, target.name)
    _check_preconditions(target, options.get("preconditions") or {}, old["metadata"])
    if dry_run(request) or "All" in (options.get("dryRun") or []):
        return old
    if target.kind.plural == "namespaces":
        return api.terminate_namespace(target.name)
    grace = None
    if target.kind.plural == "pods":
        query = request.query.get("gracePeriodSeconds")
        grace = graceful.pod_grace_seconds(old, graceful.with_query(options, query))
    policy, warnings = garbage.propagation_policy(target.kind, options, request.query)
    request.warnings += warnings
    return api.store.delete(
        target.kind,
        target.namespace,
        target.name,
        grace=grace,
        finalizer=garbage.finalizer_for(policy),
    )


def delete(api: Any, request: Request, target: Any) -> Response:
    deleted = delete_one(api, request, target)
    headers = warning_headers(request.warnings)
    if target.kind.plural in RETURNS_DELETED_OBJECT or deleted["metadata"].get("deletionTimestamp"):
        return json_response(200, served(target, deleted), headers)
    return json_response(200, _success(target, deleted), headers)


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
