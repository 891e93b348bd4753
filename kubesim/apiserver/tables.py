"""`Table` responses for kubectl's human output (`kubectl get` asks with `as=Table`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubesim.base.http import Request
from kubesim.registry.validation import DEFAULT_K8S_VERSION, schema_release, upstream_definitions

# A description is upstream's own text, or (definition, field): the SwaggerDoc of that field,
# which is its description in the OpenAPI schemas.
Description = str | tuple[str, str]
Column = tuple[str, str, int, Description, Callable[[dict[str, Any]], Any]]
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
CORE = "io.k8s.api.core.v1."
RESOURCE = "io.k8s.api.resource.v1."
NONE = "<none>"
UNKNOWN = "<unknown>"  # printNode's word for an empty kernel version or OS image


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


# The same columns for events.k8s.io/v1 Events, whose fields have other names.
def _event_object(event: dict[str, Any]) -> str:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(event: dict[str, Any]) -> str:
    last = event.get("lastTimestamp") or event.get("deprecatedLastTimestamp")
    stamp = last or event.get("eventTime") or ""
    return age({"metadata": {"creationTimestamp": stamp[:19] + "Z"}}) if stamp else NONE


def _config_map_size(config_map: dict[str, Any]) -> int:
    return len(config_map.get("data") or {}) + len(config_map.get("binaryData") or {})


def _event_message(event: dict[str, Any]) -> str:
    return event.get("message") or event.get("note") or NONE


def _node_info(name: str, field: str, priority: int, empty: str = NONE) -> Column:
    def read(node: dict[str, Any]) -> str:
        info = (node.get("status") or {}).get("nodeInfo") or {}
        return info.get(field) or empty

    return (name, "", priority, (CORE + "NodeSystemInfo", field), read)


def _path(*keys: str) -> Callable[[dict[str, Any]], Any]:
    def read(obj: dict[str, Any]) -> Any:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return NONE if value in (None, "") else value

    return read


NAME: Column = ("Name", "name", 0, (META, "name"), _name)
AGE: Column = ("Age", "", 0, (META, "creationTimestamp"), age)
COLUMNS: dict[str, list[Column]] = {
    "pods": [
        NAME,
        (
            "Ready",
            "",
            0,
            "The aggregate readiness state of this pod for accepting traffic.",
            _pod_ready,
        ),
        ("Status", "", 0, "The aggregate status of the containers in this pod.", _pod_status),
        (
            "Restarts",
            "",
            0,
            "The number of times the containers in this pod have been restarted and when the "
            "last container in this pod has restarted.",
            _pod_restarts,
        ),
        AGE,
        ("IP", "", 1, (CORE + "PodStatus", "podIP"), _path("status", "podIP")),
        ("Node", "", 1, (CORE + "PodSpec", "nodeName"), _path("spec", "nodeName")),
        (
            "Nominated Node",
            "",
            1,
            (CORE + "PodStatus", "nominatedNodeName"),
            _path("status", "nominatedNodeName"),
        ),
        ("Readiness Gates", "", 1, (CORE + "PodSpec", "readinessGates"), lambda pod: NONE),
    ],
    "nodes": [
        NAME,
        ("Status", "", 0, "The status of the node", _node_status),
        ("Roles", "", 0, "The roles of the node", lambda node: NONE),
        AGE,
        _node_info("Version", "kubeletVersion", 0),
        ("Internal-IP", "", 1, (CORE + "NodeStatus", "addresses"), _node_address("InternalIP")),
        ("External-IP", "", 1, (CORE + "NodeStatus", "addresses"), _node_address("ExternalIP")),
        _node_info("OS-Image", "osImage", 1, UNKNOWN),
        _node_info("Kernel-Version", "kernelVersion", 1, UNKNOWN),
        _node_info("Container-Runtime", "containerRuntimeVersion", 1),
    ],
    "namespaces": [
        NAME,
        ("Status", "", 0, "The status of the namespace", _path("status", "phase")),
        AGE,
    ],
    "secrets": [
        NAME,
        ("Type", "", 0, (CORE + "Secret", "type"), _path("type")),
        ("Data", "", 0, (CORE + "Secret", "data"), lambda secret: len(secret.get("data") or {})),
        AGE,
    ],
    "configmaps": [
        NAME,
        ("Data", "", 0, (CORE + "ConfigMap", "data"), _config_map_size),
        AGE,
    ],
    "resourceclaims": [
        NAME,
        (
            "State",
            "",
            0,
            "A summary of the current state (allocated, pending, reserved, etc.).",
            _claim_state,
        ),
        AGE,
    ],
    "resourceslices": [
        NAME,
        ("Node", "", 0, (RESOURCE + "ResourceSliceSpec", "nodeName"), _path("spec", "nodeName")),
        ("Driver", "", 0, (RESOURCE + "ResourceSliceSpec", "driver"), _path("spec", "driver")),
        ("Pool", "", 0, (RESOURCE + "ResourcePool", "name"), _path("spec", "pool", "name")),
        AGE,
    ],
    "events": [
        ("Last Seen", "", 0, (CORE + "Event", "lastTimestamp"), _event_last_seen),
        ("Type", "", 0, (CORE + "Event", "type"), _path("type")),
        ("Reason", "", 0, (CORE + "Event", "reason"), _path("reason")),
        ("Object", "", 0, (CORE + "Event", "involvedObject"), _event_object),
        ("Message", "", 0, (CORE + "Event", "message"), _event_message),
    ],
}


def _described(description: Description) -> str:
    if isinstance(description, str):
        return description
    definition, field = description
    definitions = upstream_definitions(schema_release("v1", DEFAULT_K8S_VERSION))
    return definitions[definition]["properties"][field].get("description", "")


def _definition(column: Column) -> dict[str, Any]:
    name, format_, priority, description, _ = column
    return {
        "name": name,
        "type": "string",
        "format": format_,
        "description": _described(description),
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
        row: dict[str, Any] = {"cells": [column[4](obj) for column in columns]}
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
