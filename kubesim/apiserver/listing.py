"""The list verb: selectors, paging with continue tokens, a resourceVersion from the future."""

from __future__ import annotations

import json
from typing import Any

from kubesim.apiserver import tables
from kubesim.base import errors, gojson
from kubesim.base.http import Request, Response, json_response
from kubesim.base.selectors import field_matcher, label_matcher
from kubesim.registry.admission import api_version_of, encoded, served


def _continue_token(rv: int, last_key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "/".join(last_key) + "\x00"})
    return gojson.raw_url_b64encode(raw.encode())


def _continue_start(token: str) -> str:
    """The key a continue token starts at; 400 with storage.DecodeContinue's words."""
    try:
        decoded = gojson.loads(gojson.raw_url_b64decode(token))
    except ValueError as error:
        raise _invalid_continue(str(error)) from None
    if not isinstance(decoded, dict):
        raise _invalid_continue(
            "json: cannot unmarshal into Go value of type storage.continueToken"
        )
    if decoded.get("v") != "meta.k8s.io/v1":
        version = json.dumps(decoded.get("v") or "")
        raise _invalid_continue(f"server does not recognize this encoded version {version}")
    if not decoded.get("rv"):
        raise _invalid_continue("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not decoded.get("start"):
        raise _invalid_continue("encoded start key empty (version meta.k8s.io/v1)")
    return str(decoded["start"])


def _invalid_continue(problem: str) -> errors.ApiError:
    return errors.bad_request(f"invalid continue token: continue key is not valid: {problem}")


def _limit(request: Request) -> int:
    try:
        return gojson.parse_int(request.query.get("limit", "0"))
    except ValueError as error:
        raise errors.bad_request(str(error)) from None


def selected_items(api: Any, request: Request, target: Any) -> tuple[list[dict[str, Any]], int]:
    labels = label_matcher(request.query.get("labelSelector"))
    fields = field_matcher(
        request.query.get("fieldSelector"),
        target.kind.field_selectors,
        api_version=target.kind.api_version(target.version),
        kind=target.kind.kind,
    )
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
    limit = _limit(request)
    if request.query.get("resourceVersion") == "0" and not start:
        # Served from the watch cache, which does not page (the cacher's shouldDelegateList
        # sends a limited list to etcd only for other resourceVersions): the limit is ignored.
        limit = 0
    if limit and len(items) > limit:
        last = items[limit - 1]["metadata"]
        meta["continue"] = _continue_token(rv, (last.get("namespace") or "", last["name"]))
        if not (request.query.get("labelSelector") or request.query.get("fieldSelector")):
            meta["remainingItemCount"] = len(items) - limit  # etcd counts only unfiltered lists
        items = items[:limit]
    return items, meta


# How long a list for a resourceVersion the store has not reached yet waits for it (the watch
# cache's blockTimeout).
TOO_LARGE_WAIT_SECONDS = 3.0


def wait_for_resource_version(api: Any, request: Request) -> None:
    """A list at a resourceVersion from the future waits for it, then answers 504."""
    wanted = request.query.get("resourceVersion", "")
    if not wanted.isdigit() or int(wanted) <= api.store.resource_version:
        return
    if not api.store.wait_for(int(wanted), TOO_LARGE_WAIT_SECONDS):
        raise errors.too_large_resource_version(int(wanted), api.store.resource_version)


def list_objects(api: Any, request: Request, target: Any) -> Response:
    wait_for_resource_version(api, request)
    items, rv = selected_items(api, request, target)
    items, meta = _page(request, items, rv)
    if tables.wanted(request):
        objs = [served(target, item) for item in items]
        return json_response(200, tables.table(target.kind.plural, objs, request, meta))
    head = {
        "kind": f"{target.kind.kind}List",
        "apiVersion": api_version_of(target),
        "metadata": meta,
    }
    items_json = b",".join(encoded(target, item, list_item=True) for item in items)
    body = (
        json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"items":[' + items_json + b"]}"
    )
    return Response(200, body)
