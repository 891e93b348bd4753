"""`Table` responses for kubectl's human output (`kubectl get` asks with `as=Table`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubesim.server import Request

Column = tuple[str, str, int, Callable[[dict[str, Any]], Any]]
NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated."
)
NONE = "<none>"


def wanted(request: Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, as the AGE column shows it."""
    seconds = int(max(seconds, 0))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d{hours % 24}h" if days < 8 and hours % 24 else f"{days}d"


def age(obj: dict[str, Any]) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return NONE
    created = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - created).total_seconds())


def _name(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "")


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Pending"
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated is not None:
            reason = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode', 0)}"
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_ready(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for container in statuses if container.get("ready"))
    return f"{ready}/{len((pod.get('spec') or {}).get('containers') or [])}"


def _pod_restarts(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return str(sum(container.get("restartCount", 0) for container in statuses))


def _claim_state(claim: dict[str, Any]) -> str:
    status = claim.get("status") or {}
    states = ["deleted"] if claim.get("metadata", {}).get("deletionTimestamp") else []
    if status.get("allocation"):
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    elif not states:
        states.append("pending")
    return ",".join(states)


def _node_status(node: dict[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return "Ready" if ready else "NotReady"


def _node_address(kind: str) -> Callable[[dict[str, Any]], str]:
    def read(node: dict[str, Any]) -> str:
        addresses = (node.get("status") or {}).get("addresses") or []
        found = [a["address"] for a in addresses if a.get("type") == kind]
        return ",".join(found) or NONE

    return read


def _event_object(event: dict[str, Any]) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(event: dict[str, Any]) -> str:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
    return age({"metadata": {"creationTimestamp": stamp[:19] + "Z"}}) if stamp else NONE


def _path(*keys: str) -> Callable[[dict[str, Any]], Any]:
    def read(obj: dict[str, Any]) -> Any:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return NONE if value in (None, "") else value

    return read


NAME: Column = ("Name", "name", 0, _name)
AGE: Column = ("Age", "", 0, age)
COLUMNS: dict[str, list[Column]] = {
    "pods": [
        NAME,
        ("Ready", "", 0, _pod_ready),
        ("Status", "", 0, _pod_status),
        ("Restarts", "", 0, _pod_restarts),
        AGE,
        ("IP", "", 1, _path("status", "podIP")),
        ("Node", "", 1, _path("spec", "nodeName")),
        ("Nominated Node", "", 1, _path("status", "nominatedNodeName")),
        ("Readiness Gates", "", 1, lambda pod: NONE),
    ],
    "nodes": [
        NAME,
        ("Status", "", 0, _node_status),
        ("Roles", "", 0, lambda node: NONE),
        AGE,
        ("Version", "", 0, _path("status", "nodeInfo", "kubeletVersion")),
        ("Internal-IP", "", 1, _node_address("InternalIP")),
        ("External-IP", "", 1, _node_address("ExternalIP")),
        ("OS-Image", "", 1, _path("status", "nodeInfo", "osImage")),
        ("Kernel-Version", "", 1, _path("status", "nodeInfo", "kernelVersion")),
        ("Container-Runtime", "", 1, _path("status", "nodeInfo", "containerRuntimeVersion")),
    ],
    "namespaces": [NAME, ("Status", "", 0, _path("status", "phase")), AGE],
    "secrets": [
        NAME,
        ("Type", "", 0, _path("type")),
        ("Data", "", 0, lambda secret: len(secret.get("data") or {})),
        AGE,
    ],
    "resourceclaims": [NAME, ("State", "", 0, _claim_state), AGE],
    "resourceslices": [
        NAME,
        ("Node", "", 0, _path("spec", "nodeName")),
        ("Driver", "", 0, _path("spec", "driver")),
        ("Pool", "", 0, _path("spec", "pool", "name")),
        AGE,
    ],
    "events": [
        ("Last Seen", "", 0, _event_last_seen),
        ("Type", "", 0, _path("type")),
        ("Reason", "", 0, _path("reason")),
        ("Object", "", 0, _event_object),
        ("Message", "", 0, _path("message")),
    ],
}


def _definition(column: Column) -> dict[str, Any]:
    name, format_, priority, _ = column
    description = NAME_DESCRIPTION if format_ == "name" else name
    return {
        "name": name,
        "type": "string",
        "format": format_,
        "description": description,
        "priority": priority,
    }


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table(
    plural: str,
    objs: list[dict[str, Any]],
    request: Request,
    meta: dict[str, Any],
    *,
    definitions: bool = True,
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of `objs` (already in the served version)."""
    columns = COLUMNS.get(plural, [NAME, AGE])
    include = request.query.get("includeObject", "Metadata")
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": [column[3](obj) for column in columns]}
        row_object = _row_object(obj, include)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [_definition(c) for c in columns] if definitions else [],
        "rows": rows,
    }
