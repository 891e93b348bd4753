"""pods/binding: what a scheduler posts to put a Pod on a Node (BindingREST in
pkg/registry/core/pod/storage): the Pod gets spec.nodeName and PodScheduled=True, once."""

from __future__ import annotations

import json
from typing import Any

from kubesim.base import errors
from kubesim.base.http import Request, Response, json_response
from kubesim.registry.store import now_rfc3339
from kubesim.registry.validation import REQUIRED, FieldError


def _binding(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise errors.bad_request("the body of a Binding must be JSON") from None
    if not isinstance(body, dict) or body.get("kind") != "Binding":
        raise errors.bad_request("the body must be a Binding")
    return body


def _already_assigned(pod: str, node: str) -> errors.ApiError:
    message = (
        f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} is already '
        f'assigned to node "{node}"'
    )
    return errors.ApiError(409, "Conflict", message, {"name": pod, "kind": "pods/binding"})


def bind(api: Any, request: Request, target: Any) -> Response:
    binding = _binding(request)
    if (binding.get("metadata") or {}).get("name") != target.name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    node = (binding.get("target") or {}).get("name")
    if not node:
        raise errors.invalid("", "Binding", target.name, [FieldError(REQUIRED, "target.name")])
    pod = api.store.get(target.kind, target.namespace, target.name)
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.internal(f"pod {target.name} is being deleted, cannot be assigned to a host")
    if pod["spec"].get("nodeName"):
        raise _already_assigned(target.name, pod["spec"]["nodeName"])
    pod["spec"]["nodeName"] = node
    conditions = [
        c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] != "PodScheduled"
    ]
    scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}
    conditions.append(scheduled | {"lastTransitionTime": now_rfc3339()})
    pod.setdefault("status", {})["conditions"] = conditions
    api.store.update(target.kind, pod)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    return json_response(201, status | {"code": 201})
