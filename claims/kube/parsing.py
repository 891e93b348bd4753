"""Plain records the portal reads, built from the cluster's JSON (any resource.k8s.io version)."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from claims.kube import labels as label_keys

AttributeValue = str | int | bool
Obj = dict[str, Any]


@dataclass(frozen=True)
class ClusterInfo:
    server_version: str
    resource_versions: list[str]
    preferred_resource_version: str | None
    # Kueue's groups (kueue.x-k8s.io, visibility.kueue.x-k8s.io): the versions served.
    kueue_versions: tuple[str, ...] = ()
    kueue_visibility_versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceClassInfo:
    name: str
    selectors: list[str]
    # The extended resource (`nvidia.com/gpu`) a Pod may ask for to get this class's devices
    # through a claim the scheduler makes (spec.extendedResourceName, 1.34+).
    extended_resource_name: str = ""


@dataclass(frozen=True)
class DeviceInfo:
    node: str | None
    driver: str
    pool: str
    name: str
    attributes: dict[str, AttributeValue]
    capacity: dict[str, str]
    # Taints its driver put on it: [{key, value, effect, timeAdded}] (DRADeviceTaints).
    taints: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule (resource.k8s.io/v1alpha3): one taint for the devices it selects."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    device_class: str | None
    selectors: list[str]
    taint: dict[str, str]


@dataclass(frozen=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class ClaimState:
    namespace: str
    name: str
    uid: str
    allocated: bool
    node: str | None
    devices: list[AllocatedDevice] = field(default_factory=list)
    reserved_for: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # the portal's own (portal_labels)


@dataclass(frozen=True)
class Holding:
    """What a claim the portal did not make holds: whose it is and its allocated devices
    (driver, pool, device), no more (a shared cluster's claims may be many)."""

    namespace: str
    name: str
    devices: tuple[tuple[str, str, str], ...] = ()
    # Who holds it: a ResourceClaim, or (POD) a Pod that asked for an extended resource such as
    # `nvidia.com/gpu`, through the claim the scheduler made for it: then namespace and name
    # are the Pod's and device_classes says what it asked for.
    kind: str = "ResourceClaim"
    device_classes: tuple[str, ...] = ()


POD_HOLDING = "Pod"
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@dataclass(frozen=True)
class PreflightCheck:
    name: str
    ok: bool
    detail: str


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def device_class_info(obj: Obj) -> DeviceClassInfo:
    selectors = obj.get("spec", {}).get("selectors") or []
    expressions = [s["cel"]["expression"] for s in selectors if "cel" in s]
    return DeviceClassInfo(
        name=obj["metadata"]["name"],
        selectors=expressions,
        extended_resource_name=obj.get("spec", {}).get("extendedResourceName") or "",
    )


def _taint(taint: Obj) -> dict[str, str]:
    return {
        "key": str(taint.get("key") or ""),
        "value": str(taint.get("value") or ""),
        "effect": str(taint.get("effect") or ""),
        "timeAdded": str(taint.get("timeAdded") or ""),
    }


def taint_rule(obj: Obj) -> TaintRule:
    spec = obj.get("spec") or {}
    selector = spec.get("deviceSelector") or {}
    expressions = [s["cel"]["expression"] for s in selector.get("selectors") or [] if "cel" in s]
    return TaintRule(
        name=obj["metadata"]["name"],
        driver=selector.get("driver"),
        pool=selector.get("pool"),
        device=selector.get("device"),
        device_class=selector.get("deviceClassName"),
        selectors=expressions,
        taint=_taint(spec.get("taint") or {}),
    )


def _attribute_value(value: Any) -> AttributeValue:
    if isinstance(value, dict):
        for kind in ("string", "version", "int", "bool"):
            if kind in value:
                return value[kind]
    return str(value)


def _capacity_value(value: Any) -> str:
    # v1alpha3 served a bare quantity; later versions wrap it as {value: ...}.
    return str(value.get("value")) if isinstance(value, dict) else str(value)


def _device_info(slice_spec: Obj, device: Obj) -> DeviceInfo:
    # v1beta1 keeps attributes and capacity under `basic`; v1beta2 and v1 flatten them.
    body = device.get("basic") or device
    return DeviceInfo(
        node=slice_spec.get("nodeName") or device.get("nodeName"),
        driver=slice_spec["driver"],
        pool=slice_spec["pool"]["name"],
        name=device["name"],
        attributes={k: _attribute_value(v) for k, v in (body.get("attributes") or {}).items()},
        capacity={k: _capacity_value(v) for k, v in (body.get("capacity") or {}).items()},
        taints=[_taint(t) for t in body.get("taints") or []],
    )


def _current_slices(slices: list[Obj]) -> list[Obj]:
    """Only slices of a pool's newest generation describe the pool (older ones are stale)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), int(s["spec"]["pool"].get("generation", 0)))
    return [
        s
        for s in slices
        if int(s["spec"]["pool"].get("generation", 0))
        == newest[(s["spec"]["driver"], s["spec"]["pool"]["name"])]
    ]


def devices_from_slices(slices: list[Obj]) -> list[DeviceInfo]:
    devices = [
        _device_info(s["spec"], device)
        for s in _current_slices(slices)
        for device in s["spec"].get("devices") or []
    ]
    return sorted(devices, key=lambda d: (d.node or "", d.driver, d.pool, d.name))


def _allocated_node(allocation: Obj) -> str | None:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for requirement in term.get("matchFields") or []:
            if requirement.get("key") == "metadata.name" and requirement.get("values"):
                return requirement["values"][0]
    return None


def claim_state(obj: Obj) -> ClaimState:
    status = obj.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return ClaimState(
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        uid=obj["metadata"].get("uid", ""),
        allocated=bool(allocation),
        node=_allocated_node(allocation),
        devices=[
            AllocatedDevice(r["request"], r["driver"], r["pool"], r["device"]) for r in results
        ],
        reserved_for=[r.get("name", "") for r in status.get("reservedFor") or []],
        labels=portal_labels(obj),
    )


def claim_holding(obj: Obj) -> Holding:
    """A claim outside the portal as its allocation: the rest of it wakes nobody. The claim
    the scheduler made for a Pod's extended resources is that Pod's holding."""
    metadata = obj["metadata"]
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    devices = tuple(sorted((r["driver"], r["pool"], r["device"]) for r in results))
    annotations = metadata.get("annotations") or {}
    pod = next(
        (
            owner.get("name", "")
            for owner in metadata.get("ownerReferences") or []
            if owner.get("kind") == "Pod" and owner.get("controller")
        ),
        None,
    )
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true" and pod is not None:
        requests = ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []
        classes = sorted({_request_class(request) for request in requests} - {""})
        return Holding(
            namespace=metadata.get("namespace", ""),
            name=pod,
            devices=devices,
            kind=POD_HOLDING,
            device_classes=tuple(classes),
        )
    return Holding(namespace=metadata.get("namespace", ""), name=metadata["name"], devices=devices)


def _request_class(request: Obj) -> str:
    # v1 and v1beta2 put the class under `exactly`; v1beta1 on the request itself.
    return str((request.get("exactly") or request).get("deviceClassName") or "")


def portal_labels(obj: Obj) -> dict[str, str]:
    """The labels the portal writes (claims.kube.labels), none of anyone else's: a label
    another tool adds is no change to follow."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {key: value for key, value in labels.items() if label_keys.is_portal_label(key)}


def metadata_only(obj: Obj) -> Obj:
    """What the reconciler reads of an object it only checks for presence and ownership
    (namespaces, ServiceAccounts, RoleBindings, ResourceQuotas): a cache of thousands stays
    small, and a change of anything else (a status, a finalizer) wakes nobody."""
    metadata = obj.get("metadata") or {}
    kept = {key: metadata[key] for key in ("name", "namespace", "uid") if key in metadata}
    if metadata.get("deletionTimestamp"):
        kept["deletionTimestamp"] = metadata["deletionTimestamp"]
    return {"metadata": kept | {"labels": portal_labels(obj)}}
