"""Devices a team holds without a request of the portal: claims made in its namespaces by hand
(its members may use kubectl there) or by the scheduler for a Pod that asked for
`nvidia.com/gpu` (the extended resource). They count in the team's quota lines, as they count
in the namespace's ResourceQuota: a GPU held is held, whoever made the claim.

Read from the cluster's inventory (`held_outside`, kept current by the cluster loop): the devices
held there by claims the portal did not make, with their namespace. A device is of a class when
the class's selectors hold for it, as the scheduler decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from claims.models import Cluster, NamespaceRequest
from claims.read import device_matching, inventory

# Namespaces that exist in the cluster, or may still: what is in them is theirs.
HOLDING_NAMESPACES = (
    NamespaceRequest.State.APPROVED,
    NamespaceRequest.State.ACTIVE,
    NamespaceRequest.State.DELETING,
)


def held_outside(cluster: Cluster, owners: Iterable[int], device_class: str) -> int:
    """Devices of the class that claims the portal did not make hold in the namespaces these
    users asked for on the cluster."""
    return held_outside_by_class(cluster, owners, [device_class]).get(device_class, 0)


def held_outside_by_class(
    cluster: Cluster, owners: Iterable[int], device_classes: Iterable[str]
) -> dict[str, int]:
    rows = inventory.held_outside(cluster.inventory or {})
    if not rows:
        return {}
    names = set(
        NamespaceRequest.objects.filter(
            cluster=cluster, owner_id__in=list(owners), state__in=HOLDING_NAMESPACES
        ).values_list("name", flat=True)
    )
    held = {(r["driver"], r["pool"], r["device"]) for r in rows if r.get("namespace") in names}
    if not held:
        return {}
    found = {}
    with device_matching.matching_memo(cluster.inventory):
        for device_class in set(device_classes):
            matching = device_matching.matching_ids(cluster.inventory, device_class, "")
            found[device_class] = len(held & matching)
    return found
