"""Can a claim ever be satisfied, and how much of it is free now: per node, as DRA allocates.

DRA gives one claim devices that are all reachable from the one node its Pod runs on: the
devices a node publishes plus those published for every node (no node name). So a claim for
3 GPUs cannot be met on a cluster of 2-GPU nodes, however many nodes it has.

"Free now" counts the devices allocated to no claim at all: the portal's (from the last sync)
and those made outside it (Cluster.inventory's held_outside, from the cluster loop), so a claim
that cannot fit because another team holds the GPUs says so before it is approved. A tainted
device (NoSchedule or NoExecute) is not free either: the portal's claims tolerate no taint.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.exceptions import ValidationError

import dracel
from claims.models import ClaimRequest, Cluster
from claims.policy import device_picker
from claims.policy.feasibility_words import Feasibility
from claims.read.inventory import held_outside_ids, tainted_ids, unavailable_ids

# Devices held, by cluster id; feasibility already found, by what was asked.
Taken = dict[int, set[tuple[str, str, str]]]
Known = dict[tuple[int, str, int | None, str], Feasibility]


def of_claim(
    claim: ClaimRequest, taken: Taken | None = None, known: Known | None = None
) -> Feasibility:
    """Feasibility of a claim, saved or not (the form's preview), on its namespace's cluster.

    `taken` caches the allocated devices per cluster across the rows of one page (one query
    per cluster, not one per claim); `known` the answers for claims asking the same (CEL
    runs once per device for each: a page of alike claims would run it thousands of times)."""
    cluster = claim.namespace_request.cluster
    taken = {} if taken is None else taken
    known = {} if known is None else known
    # A count of 0 stays 0: it is the count field's error, not a claim for 1.
    count = None if claim.all_devices else (1 if claim.count is None else claim.count)
    key = (cluster.pk, claim.device_class, count, claim.selector)
    if key not in known:
        if cluster.pk not in taken:
            taken[cluster.pk] = _allocated(cluster)
        allocated = taken[cluster.pk] | unavailable_ids(cluster.inventory)
        known[key] = assess(
            cluster=cluster,
            device_class=claim.device_class,
            count=count,
            selector=claim.selector,
            allocated=allocated,
        )
    return known[key]


def of_alternatives(claim: ClaimRequest, taken: Taken | None = None) -> list[Feasibility]:
    """Feasibility of each of the claim's alternatives, in order (of_claim's for the first)."""
    taken = {} if taken is None else taken
    first = of_claim(claim, taken)
    allocated = taken[claim.namespace_request.cluster.pk] | held_outside_ids(
        claim.namespace_request.cluster.inventory
    )
    further = [
        assess(
            cluster=claim.namespace_request.cluster,
            device_class=alt["device_class"],
            count=None if alt.get("all_devices") else (alt.get("count") or 1),
            selector=alt.get("selector") or "",
            allocated=allocated,
        )
        for alt in claim.further_alternatives or []
    ]
    return [first, *further]


def first_fitting(alternatives: list[Feasibility]) -> int | None:
    """The position (from 1) of the first alternative that can be met and fits now, as the
    scheduler tries them; None when none fits now."""
    for position, found in enumerate(alternatives, start=1):
        if found.possible is not False and found.fits_now:
            return position
    return None


def assess(
    *,
    cluster: Cluster,
    device_class: str,
    count: int | None,
    selector: str,
    allocated: set[tuple[str, str, str]] | None = None,
) -> Feasibility:
    valid = not (selector and dracel.compile_error(selector))
    found = _matching_devices(cluster.inventory, device_class, selector) if valid else ([], 0, 0)
    devices, unevaluated, of_class = found
    per_node = _per_node(devices)
    taken = _allocated(cluster) if allocated is None else allocated
    outside = held_outside_ids(cluster.inventory) & taken
    free_devices = [d for d in devices if _id(d) not in taken]
    free = _per_node(free_devices)
    best_node, most = per_node.most_common(1)[0] if per_node else ("", 0)
    free_node, most_free = free.most_common(1)[0] if free else ("", 0)
    but_outside = _per_node([d for d in devices if _id(d) not in taken - outside])
    return Feasibility(
        device_class=device_class,
        matching=len(devices),
        max_on_one_node=most,
        best_node=free_node or best_node,
        free_on_best_node=most_free,
        free_in_cluster=len(free_devices),
        selector=selector,
        selector_evaluated=not unevaluated,
        asked=count,
        selector_valid=valid,
        unevaluated=unevaluated,
        of_class=of_class,
        held_outside=sum(1 for d in devices if _id(d) in outside),
        tainted=len({_id(d) for d in devices} & tainted_ids(cluster.inventory)),
        free_on_best_node_but_outside=max(but_outside.values(), default=0),
    )


def _id(device: dict[str, Any]) -> tuple[str, str, str]:
    return (device["driver"], device["pool"], device["name"])


def check_count(*, cluster: Cluster, device_class: str, count: int | None, selector: str) -> None:
    """A field error on count when no single node has that many devices for the claim."""
    if count is None or not cluster.inventory.get("devices"):
        return
    # Whether it can ever be met does not depend on what is taken now: no allocations read.
    found = assess(
        cluster=cluster, device_class=device_class, count=count, selector=selector, allocated=set()
    )
    problem = found.count_problem()
    if problem:
        raise ValidationError({"count": [problem]})


def _matching_devices(
    inv: dict[str, Any], device_class: str, selector: str
) -> tuple[list[dict[str, Any]], int, int]:
    """The devices of the class the selector holds for (it compiles in the DRA CEL
    environment: quantity(), semver(), ... as the scheduler has them), how many of the class
    it fails to evaluate on, and how many the class has. A device it fails on never counts
    as a match."""
    of_class = device_picker.devices_of_class(inv, device_class)
    if not selector:
        return of_class, 0, len(of_class)
    outcomes = [(d, _holds(selector, d)) for d in of_class]
    failed = sum(1 for _, held in outcomes if held is None)
    return [d for d, held in outcomes if held], failed, len(of_class)


def _holds(selector: str, device: dict[str, Any]) -> bool | None:
    """Whether the selector holds for the device; None when evaluating it fails (an
    attribute the device lacks): then neither it nor its negation holds."""
    activation = dracel.device_activation(device["driver"], device)
    if dracel.matches(selector, activation):
        return True
    return False if dracel.matches(f"!({selector})", activation) else None


def _per_node(devices: list[dict[str, Any]]) -> Counter[str]:
    """Devices reachable from each node: its own plus those published for every node."""
    own = Counter(d["node"] for d in devices if d.get("node"))
    everywhere = sum(1 for d in devices if not d.get("node"))
    if not own:
        return Counter({"": everywhere}) if everywhere else Counter()
    return Counter({node: count + everywhere for node, count in own.items()})


def allocated_on(cluster_ids: set[int]) -> Taken:
    """The `taken` of of_claim for several clusters at once: one query for a page of claims
    (of_claim adds what claims made outside the portal hold, from the cluster's inventory)."""
    taken: Taken = {cluster_id: set() for cluster_id in cluster_ids}
    allocations = ClaimRequest.objects.filter(
        namespace_request__cluster_id__in=cluster_ids, allocation__isnull=False
    ).values_list("namespace_request__cluster_id", "allocation")
    for cluster_id, allocation in allocations:
        taken[cluster_id] |= _devices_of(allocation)
    return taken


def _devices_of(allocation: dict[str, Any] | None) -> set[tuple[str, str, str]]:
    return {
        (d.get("driver", ""), d.get("pool", ""), d.get("device", ""))
        for d in (allocation or {}).get("devices", [])
    }


def _allocated(cluster: Cluster) -> set[tuple[str, str, str]]:
    """Devices not free: held by the claims the portal follows, as the last sync saw them,
    by claims made outside it, and tainted, as the cluster loop last stored them."""
    allocations = ClaimRequest.objects.filter(
        namespace_request__cluster=cluster, allocation__isnull=False
    ).values_list("allocation", flat=True)
    ours = {
        (d.get("driver", ""), d.get("pool", ""), d.get("device", ""))
        for allocation in allocations
        for d in (allocation or {}).get("devices", [])
    }
    return ours | unavailable_ids(cluster.inventory)
