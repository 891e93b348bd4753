"""pods/eviction: the policy/v1 Eviction that `kubectl drain` posts. kubesim has no
PodDisruptionBudgets, so every eviction is allowed and deletes the Pod (gracefully, with the
Eviction's deleteOptions), as the eviction REST storage does when no budget covers the Pod."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from kubesim.apiserver import handlers
from kubesim.base import errors
from kubesim.base.http import Request, Response, json_response
from kubesim.registry.store import now_rfc3339

KIND = "Eviction"
API_VERSIONS = ("policy/v1", "policy/v1beta1")


def _eviction(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise errors.bad_request("the body of an Eviction must be JSON") from None
    if not isinstance(body, dict) or body.get("kind") != KIND:
        raise errors.bad_request(f"the body must be a {KIND}")
    if body.get("apiVersion") not in API_VERSIONS:
        raise errors.bad_request(f"unsupported {KIND} version {body.get('apiVersion')!r}")
    return body


def evict(api: Any, request: Request, target: Any) -> Response:
    eviction = _eviction(request)
    if (eviction.get("metadata") or {}).get("name") != target.name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    deleting = dataclasses.replace(request, method="DELETE", body=json.dumps(options).encode())
    pod = copy.copy(target)
    pod.subresource = None
    _add_disruption_target(api, target)
    handlers.delete_one(api, deleting, pod)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    return json_response(201, status | {"code": 201})


def _add_disruption_target(api: Any, target: Any) -> None:
    """addConditionAndDeletePod: a Pod not yet finished gets the DisruptionTarget condition
    (reason EvictionByEvictionAPI) before it is deleted."""
    stored = api.store.get(target.kind, target.namespace, target.name)
    status = stored.setdefault("status", {})
    conditions = status.get("conditions") or []
    if status.get("phase") in ("Succeeded", "Failed") or any(
        c.get("type") == "DisruptionTarget" for c in conditions
    ):
        return
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    status["conditions"] = [*conditions, condition]
    api.store.update(target.kind, stored)
