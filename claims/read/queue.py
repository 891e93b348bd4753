"""The queue: claims that wait for devices, in the order the portal starts them.

A claim waits when it has no devices and something would use them: its Job was created
suspended by the portal, its notebook's or run's Pod is not created yet (claims/worker/
queue_turn.py decides, queue_steps.py starts them in order), or a Pod of it (a verification
run's, a workload's) waits for the scheduler. Claims wait per cluster for the same
devices (their device class, and the GPU model when the request names one), ordered by
priority (an approver moves a claim up or down) and then age. The estimate is only ever what
the holders' expiry times promise: "unknown" when nothing is known, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from claims.models import ClaimRequest, Cluster, VerificationRun, Workload
from claims.read import device_matching, gpu_map, why_pending

CS, RS, WS = ClaimRequest.State, VerificationRun.State, Workload.State
# Made in the cluster (or about to be) and without devices yet.
UNALLOCATED = (CS.APPROVED, CS.APPLYING, CS.WAITING)
# A run whose Pod exists and is not yet running; a workload whose Job or Pod exists.
PENDING_RUNS = (RS.PENDING,)
# A run of an applied claim whose Pod is not made yet: it waits its turn (or is being made).
HELD_RUNS = (RS.QUEUED, RS.CREATING)
STARTED_WORKLOADS = (WS.APPLYING, WS.STARTED)


@dataclass(frozen=True)
class Estimate:
    at: datetime | None  # None: unknown
    node: str = ""

    def __str__(self) -> str:
        if self.at is None:
            return _("unknown")
        return _("by %(time)s at the latest, when a claim on %(node)s expires") % {
            "time": _when(self.at),
            "node": self.node,
        }


@dataclass(frozen=True)
class Spot:
    """One waiting claim's place: position `position` of `of` waiting for `what`."""

    claim_id: int
    position: int
    of: int
    what: str
    reason: str
    estimate: Estimate
    fits_now: bool  # its work may start now (admitted_in_order)
    # Whether the cluster has enough matching devices on one node at all: a claim that can
    # never fit does not wait in the queue (its Pod goes to the scheduler, which says why).
    can_fit: bool = True

    def as_dict(self) -> dict[str, object]:
        return {
            "position": self.position,
            "of": self.of,
            "waiting_for": self.what,
            "reason": self.reason,
            "estimate": str(self.estimate),
            "estimate_at": self.estimate.at,
        }


def _when(moment: datetime) -> str:
    local = timezone.localtime(moment)
    if local.date() == timezone.localdate():
        return date_format(local, "H:i")
    return date_format(local, "j M H:i")


def waiting_for(claim: ClaimRequest) -> str:
    """What the claim waits for: its device class, and its GPU model when it names one."""
    if claim.gpu_model:
        return f"{claim.device_class} ({claim.gpu_model})"
    return claim.device_class


def _asked(claim: ClaimRequest) -> why_pending.Asked:
    return why_pending.Asked(
        device_class=claim.device_class,
        count=None if claim.all_devices else claim.count or 1,
        selector=claim.selector,
    )


def _waiting_rows(clusters: Iterable[Cluster] | None = None) -> Any:
    wants = (
        Q(workloads__state__in=STARTED_WORKLOADS)
        | Q(runs__state__in=PENDING_RUNS)
        | Q(state=CS.WAITING, runs__state__in=HELD_RUNS)
    )
    rows = ClaimRequest.objects.filter(state__in=UNALLOCATED, allocation__isnull=True)
    if clusters is not None:
        rows = rows.filter(namespace_request__cluster__in=clusters)
    return rows.filter(wants)


def waiting_claims(cluster: Cluster) -> list[ClaimRequest]:
    """The cluster's waiting claims, in queue order (each group's order is this order)."""
    ids = _waiting_rows([cluster]).values_list("pk", flat=True)
    rows = ClaimRequest.objects.filter(pk__in=set(ids)).select_related("namespace_request")
    return sorted(rows, key=lambda c: (-c.queue_priority, c.created, c.pk))


@dataclass(frozen=True)
class Held:
    """Devices held by one claim, and when the portal takes them back (None: unknown)."""

    devices: frozenset[gpu_map.DeviceId]
    expires_at: datetime | None
    claim_id: int
    requested_as: str = ""  # the extended resource a Pod asked for (the scheduler's claim)


def holdings(cluster: Cluster) -> list[Held]:
    """What every claim on the cluster holds: the portal's (with their expiry) and others'."""
    rows = ClaimRequest.objects.filter(
        namespace_request__cluster=cluster, allocation__isnull=False
    ).values_list("pk", "allocation", "expires_at")
    found = [Held(gpu_map.allocated_ids(a), expires, pk) for pk, a, expires in rows]
    outside = gpu_map.outside_holds(cluster.inventory, shown=False)
    return found + [Held(hold.devices, None, hold.claim_id, hold.requested_as) for hold in outside]


def queue_of(cluster: Cluster) -> dict[int, Spot]:
    """Every waiting claim's spot, by claim id."""
    if cluster.kueue:
        return {}  # Kueue queues there: its word is on the workloads (claims/read/kueue.py)
    claims = waiting_claims(cluster)
    if not claims:
        return {}
    with device_matching.matching_memo(cluster.inventory):
        return _spots(cluster, claims)


def _as_holds(held: list[Held]) -> list[gpu_map.Hold]:
    """What the holders hold, as the GPU map's and why-pending's counts take it."""
    return [
        gpu_map.Hold(
            claim_id=h.claim_id,
            claim_name="",
            namespace="",
            owner="",
            devices=h.devices,
            requested_as=h.requested_as,
        )
        for h in held
    ]


def _by_what(claims: list[ClaimRequest]) -> dict[str, list[ClaimRequest]]:
    """The waiting claims by what they wait for, each group in queue order."""
    groups: dict[str, list[ClaimRequest]] = {}
    for claim in claims:
        groups.setdefault(waiting_for(claim), []).append(claim)
    return groups


def _spots(cluster: Cluster, claims: list[ClaimRequest]) -> dict[int, Spot]:
    held = holdings(cluster)
    holds = _as_holds(held)
    said = _pod_words(claims)
    spots = {}
    for what, members in _by_what(claims).items():
        admitted = admitted_in_order(cluster.inventory, members, holds)
        for index, claim in enumerate(members):
            asked = _asked(claim)
            message, warnings = said.get(claim.pk, ("", []))
            reasons = why_pending.explain(
                asked=asked,
                inventory=cluster.inventory,
                holds=holds,
                own_claim=claim.pk,
                pod_message=message,
                pod_warnings=warnings,
            )
            ahead = [_asked(c).count for c in members[:index]]
            spots[claim.pk] = Spot(
                claim_id=claim.pk,
                position=index + 1,
                of=len(members),
                what=what,
                reason=_reason(reasons, index),
                estimate=estimate(cluster.inventory, asked, ahead, held),
                fits_now=claim.pk in admitted,
                can_fit=can_fit(cluster.inventory, asked),
            )
    return spots


def startable(cluster: Cluster) -> set[int]:
    """The waiting claims whose work may start now: admitted in queue order
    (admitted_in_order), or never fitting the cluster at all (the scheduler says why). What the
    worker asks before it creates anything: no words, no estimate."""
    claims = waiting_claims(cluster)
    if not claims:
        return set()
    holds = _as_holds(holdings(cluster))
    found: set[int] = set()
    with device_matching.matching_memo(cluster.inventory):
        for members in _by_what(claims).values():
            found |= admitted_in_order(cluster.inventory, members, holds)
            found |= {c.pk for c in members if not can_fit(cluster.inventory, _asked(c))}
    return found


def admitted_in_order(
    inventory: dict, members: list[ClaimRequest], holds: list[gpu_map.Hold]
) -> set[int]:
    """The waiting claims of one queue whose work may start now, as Kueue's StrictFIFO admits:
    in queue order, each while its devices are free once the claims admitted ahead of it have
    taken theirs (on the node with the most free), until the first that does not fit: it
    stays the head, and nothing behind it takes what it waits for. A claim that can never fit
    is left out (its Pod goes to the scheduler, which says why) and holds nobody up."""
    taken: Counter[str] = Counter()
    admitted: set[int] = set()
    for claim in members:
        asked = _asked(claim)
        if not can_fit(inventory, asked):
            continue
        devices = why_pending.count_devices(inventory, asked, holds, claim.pk)
        free = {
            node: max(devices.free_per_node[node] - taken[node], 0) for node in devices.per_node
        }
        if asked.count is None:  # "all": every matching device of some node
            nodes = [node for node, total in devices.per_node.items() if free[node] == total]
        else:
            nodes = [node for node in free if free[node] >= asked.count]
        if not nodes:
            break
        node = max(nodes, key=lambda name: free[name])
        taken[node] += devices.per_node[node] if asked.count is None else asked.count
        admitted.add(claim.pk)
    return admitted


def holds_work(claim: ClaimRequest) -> bool:
    """Work of the claim waits in the queue: a run or notebook whose Pod is not created yet,
    or a suspended Job (claims/worker/queue_turn.py)."""
    if claim.state != CS.WAITING or claim.allocation:
        return False
    held = claim.workloads.filter(suspended=True, state__in=STARTED_WORKLOADS)
    return claim.runs.filter(state=RS.QUEUED).exists() or held.exists()


def spot_of(claim: ClaimRequest) -> Spot | None:
    """The claim's place in its queue, None when it does not wait."""
    if claim.state not in UNALLOCATED or claim.allocation:
        return None
    return queue_of(claim.namespace_request.cluster).get(claim.pk)


@dataclass(frozen=True)
class Waiting:
    cluster: str
    what: str
    count: int


def counts() -> list[Waiting]:
    """How many claims wait for what, per cluster: one query while none waits."""
    busy = set(_waiting_rows().values_list("namespace_request__cluster_id", flat=True))
    found = []
    for cluster in Cluster.objects.filter(pk__in=busy).order_by("name") if busy else []:
        per_what = Counter(spot.what for spot in queue_of(cluster).values())
        found += [Waiting(cluster.name, what, n) for what, n in sorted(per_what.items())]
    return found


def _pod_words(claims: list[ClaimRequest]) -> dict[int, tuple[str, list]]:
    """What the cluster said of each claim's newest pending run's Pod."""
    runs = VerificationRun.objects.filter(claim__in=claims, state__in=PENDING_RUNS).order_by(
        "created"
    )
    return {run.claim_id: (run.state_message, run.pod_warnings or []) for run in runs}


def _reason(reasons: list[why_pending.Reason], index: int) -> str:
    if reasons:
        first = reasons[0]
        return f"{first.text} {first.cluster_says}".strip() if first.cluster_says else first.text
    if index:
        return _("Claims ahead of it in the queue go first.")
    return _("Devices are free: it starts on the next pass.")


def can_fit(inventory: dict, asked: why_pending.Asked) -> bool:
    """Enough matching devices on one node, were they all free (unknown: assumed so)."""
    if not inventory.get("devices"):
        return True
    devices = why_pending.count_devices(inventory, asked, [], None)
    if not devices.total:
        return False
    return asked.count is None or asked.count <= max(devices.per_node.values())


def estimate(
    inventory: dict, asked: why_pending.Asked, ahead: list[int | None], held: list[Held]
) -> Estimate:
    """The earliest moment by which, on some node, enough matching devices are free for this
    claim and every claim ahead of it, counting only the holders' expiry times: an upper
    bound the portal keeps (it reclaims a claim at its expiry). Unknown when a holder without
    an expiry (outside the portal, or no lifetime) stands in the way on every node."""
    matching = device_matching.matching_ids(inventory, asked.device_class, asked.selector)
    node_of = {
        (d["driver"], d["pool"], d["name"]): d.get("node") or d["pool"]
        for d in inventory.get("devices", [])
    }
    per_node: Counter[str] = Counter(node_of[d] for d in matching)
    best: Estimate = Estimate(None)
    for node, total in per_node.items():
        mine = total if asked.count is None else asked.count
        others = sum(total if count is None else count for count in ahead)
        needed = mine + others
        if needed > total:
            continue
        releases = []
        held_here = 0
        for hold in held:
            here = sum(1 for d in hold.devices if d in matching and node_of.get(d) == node)
            if here:
                held_here += here
                releases.append((hold.expires_at, here))
        free = total - held_here
        for expires_at, count in sorted(releases, key=lambda r: (r[0] is None, r[0] or 0)):
            if free >= needed or expires_at is None:
                break
            free += count
            if free >= needed and (best.at is None or expires_at < best.at):
                best = Estimate(expires_at, node)
    return best
