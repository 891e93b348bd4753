"""Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2), served where the topology's
`kueue:` section leaves `visibility` on: the pending Workloads of a ClusterQueue or of a
LocalQueue, as kueue's pkg/visibility/storage answers them.

Upstream reads its queue manager's heaps; kubesim has no Kueue controller, so the queue is
computed from the stored Workloads: those whose LocalQueue points at the ClusterQueue, active,
without QuotaReserved and not Finished, ordered as StrictFIFO orders them (higher
`spec.priority` first, then older creation). Positions count from 0, as upstream's do.
`limit` (default 1000, at most 100000) and `offset` as upstream bounds them.
"""

from __future__ import annotations

from typing import Any

from kubesim.base import errors
from kubesim.base.http import Request, Response, json_response
from kubesim.registry.kinds import kind_for
from kubesim.registry.kinds.kueue import GROUP, VERSION, VISIBILITY_GROUP

DEFAULT_LIMIT, MAX_LIMIT = 1000, 100_000
SUMMARY = "PendingWorkloadsSummary"


def resource_list(version: str) -> dict[str, Any]:
    """The group-version's resources (upstream's NewStorage map)."""
    resources = []
    for plural, kind, namespaced in (
        ("clusterqueues", "ClusterQueue", False),
        ("localqueues", "LocalQueue", True),
    ):
        base = {"namespaced": namespaced, "singularName": "", "verbs": ["get"]}
        resources.append({"name": plural, "kind": kind, **base})
        resources.append({"name": f"{plural}/pendingworkloads", "kind": SUMMARY, **base})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{VISIBILITY_GROUP}/{version}",
        "resources": resources,
    }


def _condition_true(workload: dict, kind: str) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _pending(workload: dict) -> bool:
    spec = workload.get("spec") or {}
    return (
        spec.get("active", True)
        and not _condition_true(workload, "QuotaReserved")
        and not _condition_true(workload, "Finished")
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
    )


def _stored(api: Any, plural: str, namespace: str | None = None) -> list[dict]:
    return api.store.list(kind_for(GROUP, plural), namespace, copy=False)[0]


def _cluster_queue_of(api: Any, namespace: str, name: str) -> str | None:
    for queue in _stored(api, "localqueues", namespace):
        if queue["metadata"]["name"] == name:
            return (queue.get("spec") or {}).get("clusterQueue")
    return None


def _queue(api: Any, cluster_queue: str) -> list[dict]:
    """The ClusterQueue's pending Workloads in StrictFIFO order."""
    local = {
        (q["metadata"]["namespace"], q["metadata"]["name"])
        for q in _stored(api, "localqueues")
        if (q.get("spec") or {}).get("clusterQueue") == cluster_queue
    }
    waiting = [
        w
        for w in _stored(api, "workloads")
        if (w["metadata"]["namespace"], (w.get("spec") or {}).get("queueName")) in local
        and _pending(w)
    ]
    return sorted(
        waiting,
        key=lambda w: (
            -int((w.get("spec") or {}).get("priority") or 0),
            w["metadata"].get("creationTimestamp") or "",
            w["metadata"]["name"],
        ),
    )


def _item(workload: dict, in_local: int, in_cluster: int) -> dict[str, Any]:
    meta = workload["metadata"]
    owners = [
        {key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
        for ref in meta.get("ownerReferences") or []
    ]
    metadata = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "creationTimestamp": meta.get("creationTimestamp"),
    }
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "metadata": metadata,
        "priority": int((workload.get("spec") or {}).get("priority") or 0),
        "localQueueName": (workload.get("spec") or {}).get("queueName", ""),
        "positionInClusterQueue": in_cluster,
        "positionInLocalQueue": in_local,
    }


def _bounds(request: Request) -> tuple[int, int]:
    try:
        limit = int(request.query.get("limit", DEFAULT_LIMIT))
        offset = int(request.query.get("offset", 0))
    except ValueError:
        raise errors.bad_request("limit and offset must be integers") from None
    return min(max(limit, 0), MAX_LIMIT), max(offset, 0)


def _summary(items: list[dict[str, Any]]) -> Response:
    body = {
        "kind": SUMMARY,
        "apiVersion": f"{VISIBILITY_GROUP}/{VERSION}",
        "metadata": {"creationTimestamp": None},
        "items": items,
    }
    return json_response(200, body)


def _pending_in_cluster_queue(api: Any, request: Request, name: str) -> Response:
    if not any(q["metadata"]["name"] == name for q in _stored(api, "clusterqueues")):
        raise errors.not_found(VISIBILITY_GROUP, "clusterqueue", name)
    limit, offset = _bounds(request)
    queue = _queue(api, name)[offset : offset + limit]
    return _summary([_item(w, -1, offset + index) for index, w in enumerate(queue)])


def _pending_in_local_queue(api: Any, request: Request, namespace: str, name: str) -> Response:
    cluster_queue = _cluster_queue_of(api, namespace, name)
    if cluster_queue is None:
        raise errors.not_found(VISIBILITY_GROUP, "localqueue", name)
    limit, offset = _bounds(request)
    items: list[dict[str, Any]] = []
    skipped = 0
    for index, workload in enumerate(_queue(api, cluster_queue)):
        if len(items) >= limit:
            break
        meta = workload["metadata"]
        if meta["namespace"] != namespace or workload["spec"].get("queueName") != name:
            continue
        if skipped < offset:
            skipped += 1
            continue
        items.append(_item(workload, len(items) + offset, index))
    return _summary(items)


def handle(api: Any, request: Request, parts: list[str]) -> Response:
    """GET .../clusterqueues/<name>/pendingworkloads or
    .../namespaces/<ns>/localqueues/<name>/pendingworkloads (parts after the version)."""
    if request.method not in ("GET", "HEAD"):
        raise errors.method_not_allowed()
    if len(parts) == 3 and parts[0] == "clusterqueues" and parts[2] == "pendingworkloads":
        return _pending_in_cluster_queue(api, request, parts[1])
    if (
        len(parts) == 5
        and parts[0] == "namespaces"
        and parts[2] == "localqueues"
        and parts[4] == "pendingworkloads"
    ):
        return _pending_in_local_queue(api, request, parts[1], parts[3])
    raise errors.resource_not_found()
