"""Devices a team holds without a request of the portal: claims made in its namespaces by hand
(its members may use kubectl there) or by the scheduler for a Pod that asked for
`nvidia.com/gpu` (the extended resource). They count in the team's quota lines, as they count
in the namespace's ResourceQuota: a GPU held is held, whoever made the claim.

Read from the cluster's inventory (`held_outside`, kept current by the cluster loop): the devices
held there by claims the portal did not make, with their namespace. A device is of a class when
the class's selectors hold for it, as the scheduler decides.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from claims.models import Cluster, NamespaceRequest
from claims.read import device_matching, inventory

Group = TypeVar("Group", bound=Hashable)

# Namespaces that exist in the cluster, or may still: what is in them is theirs.
HOLDING_NAMESPACES = (
    NamespaceRequest.State.APPROVED,
    NamespaceRequest.State.ACTIVE,
    NamespaceRequest.State.DELETING,
)


def held_outside(cluster: Cluster, owners: Iterable[int], device_class: str) -> int:
    """Devices of the class that claims the portal did not make hold in the namespaces these
    users asked for on the cluster."""
    return held_outside_by_group(cluster, {None: owners}, [device_class]).get(
        (None, device_class), 0
    )


def held_outside_by_group(
    cluster: Cluster, groups: Mapping[Group, Iterable[int]], device_classes: Iterable[str]
) -> dict[tuple[Group, str], int]:
    """held_outside for several groups of users at once (each team's members), by (group,
    class): one query for the namespaces of them all, however many groups."""
    rows = inventory.held_outside(cluster.inventory or {})
    if not rows:
        return {}
    group_of = {user: group for group, users in groups.items() for user in users}
    namespaces = NamespaceRequest.objects.filter(
        cluster=cluster, owner_id__in=list(group_of), state__in=HOLDING_NAMESPACES
    ).values_list("name", "owner_id")
    group_of_namespace = {name: group_of[owner] for name, owner in namespaces}
    held: dict[Group, set[tuple[str, str, str]]] = {}
    for row in rows:
        if (namespace := row.get("namespace")) in group_of_namespace:
            device = (row["driver"], row["pool"], row["device"])
            held.setdefault(group_of_namespace[namespace], set()).add(device)
    found = {}
    with device_matching.matching_memo(cluster.inventory):
        for device_class in set(device_classes):
            matching = device_matching.matching_ids(cluster.inventory, device_class, "")
            for group, devices in held.items():
                found[(group, device_class)] = len(devices & matching)
    return found
