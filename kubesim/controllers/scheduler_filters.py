"""The scheduler's filters and what they say: the inventory of nodes and devices read for a
pass, taints and tolerations (NodeUnschedulable, TaintToleration), claims fitting on a node
(the DRA plugin's Filter) and the FailedScheduling message (FitError)."""

from typing import Any, NamedTuple

from kubesim.controllers.allocator import (
    Candidate,
    DeviceId,
    allocate,
    candidates,
    with_taint_rules,
)
from kubesim.registry.kinds import kind_for
from kubesim.registry.reservations import allocation_results, object_key

SLICES, CLASSES = (
    kind_for("resource.k8s.io", "resourceslices"),
    kind_for("resource.k8s.io", "deviceclasses"),
)
NODES = kind_for("", "nodes")
TAINT_RULES = kind_for("resource.k8s.io", "devicetaintrules")
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
# The NodeUnschedulable plugin's (a cordoned node), which runs before the others.
CORDONED = "node(s) were unschedulable"
# TaintToleration's, next (upstream no longer names the taint: its value may be private).
UNTOLERATED = "node(s) had untolerated taint(s)"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
STILL_NOT_SCHEDULABLE = "still not schedulable"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"


class Unschedulable(Exception):
    """The pod fits no node now; str() is the reason the scheduler reports."""


class SchedulerError(Exception):
    """A plugin failed (not a rejection): the cycle ends with reason SchedulerError."""


class Inventory(NamedTuple):
    """Nodes, their published devices and the device classes, read once per scheduling pass."""

    nodes: list[str]
    devices: dict[str, list[Candidate]]
    classes: dict[str, dict]
    labels: dict[str, dict[str, str]]
    cordoned: frozenset[str] = frozenset()
    taints: dict[str, list[dict]] = {}
    allocatable: dict[str, dict] = {}


def read_inventory(store: Any) -> Inventory:
    listed = store.list(NODES, copy=False)[0]
    metas = [node["metadata"] for node in listed]
    nodes = [meta["name"] for meta in metas]
    labels = {meta["name"]: meta.get("labels") or {} for meta in metas}
    cordoned = frozenset(
        node["metadata"]["name"] for node in listed if (node.get("spec") or {}).get("unschedulable")
    )
    taints = {
        node["metadata"]["name"]: (node.get("spec") or {}).get("taints") or [] for node in listed
    }
    allocatable = {
        node["metadata"]["name"]: (node.get("status") or {}).get("allocatable") or {}
        for node in listed
    }
    classes = {c["metadata"]["name"]: c for c in store.list(CLASSES, copy=False)[0]}
    rules = store.list(TAINT_RULES, copy=False)[0]
    slices = with_taint_rules(store.list(SLICES, copy=False)[0], rules, classes)
    devices = {node: candidates(slices, node) for node in nodes}
    return Inventory(nodes, devices, classes, labels, cordoned, taints, allocatable)


def tolerates(pod: dict, taint: dict) -> bool:
    """Whether one of the Pod's tolerations tolerates the taint (upstream's
    Toleration.ToleratesTaint: an empty effect or key matches any; Equal compares values)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("key") and toleration["key"] != taint.get("key"):
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists":
            return True
        if operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def tolerates_cordon(pod: dict) -> bool:
    """As DaemonSet Pods do: the NodeUnschedulable plugin lets such a Pod onto a cordoned node."""
    return tolerates(pod, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})


def has_untolerated_taint(pod: dict, taints: list[dict]) -> bool:
    """The TaintToleration plugin's filter: a NoSchedule or NoExecute taint the Pod does not
    tolerate (PreferNoSchedule only scores)."""
    return any(
        taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod, taint)
        for taint in taints
    )


def fit_error(
    node_count: int,
    reasons: dict[str, int] | None = None,
    prefilter: str = "",
    postfilter: str = STILL_NOT_SCHEDULABLE,
) -> str:
    """The FailedScheduling message, built as the real scheduler's FitError.Error();
    `postfilter` is what the DRA plugin's PostFilter says (it has nothing to deallocate
    for a Pod without claims)."""
    message = f"0/{node_count} nodes are available:"
    if prefilter:
        message += f" {prefilter}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in (reasons or {}).items())
        message += " " + ", ".join(histogram) + "."
    preemption = (
        f"0/{node_count} nodes are available: {node_count} Preemption is not helpful for scheduling"
    )
    return f"{message} {postfilter}, preemption: {preemption}."


def device_ids(results: list[dict]) -> set[DeviceId]:
    return {(r["driver"], r["pool"], r["device"]) for r in results}


def allocated_devices(claim: dict) -> set[DeviceId]:
    return device_ids(allocation_results(claim))


def allocated_node(claim: dict) -> str | None:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


def fit_on_node(
    node: str, claims: list[dict], devices: list[Candidate], classes: dict, in_use: set[DeviceId]
) -> dict:
    """The new allocations of the pod's claims on `node`; `in_use` is not changed."""
    in_use = set(in_use)
    allocations: dict[tuple[str, str], list[dict]] = {}
    for claim in claims:
        if (claim.get("status") or {}).get("allocation"):
            if allocated_node(claim) not in (None, node):
                raise Unschedulable(NOT_ON_NODE)
            continue
        results = allocate(claim, classes, devices, in_use)
        if results is None:
            raise Unschedulable(CANNOT_ALLOCATE)
        in_use |= device_ids(results)
        allocations[object_key(claim)] = results
    return allocations
