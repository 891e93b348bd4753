"""Bring the database up to date with the cluster, and finish work whose message was lost.

The sync costs a fixed number of API calls per cluster and cycle, whatever the number of
claims: one list of claims and one list of Pods by label, plus logs only for Pods that are
running or just finished (and discovery + inventory now and then), and the Events of a Pod
that is pending, at most once per POD_WARNINGS_EVERY for each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from claims import (
    cluster_ops,
    cluster_registry,
    inventory,
    observations,
    run_follower,
    state_messages,
)
from claims.cluster_ops import gateway_for
from claims.kube.gateway import (
    ClaimState,
    ClusterGateway,
    DeviceClassInfo,
    DeviceInfo,
    KubeError,
    PodState,
)
from claims.kube.ownership import uid_of
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    managed_selector,
)
from claims.run_follower import GONE_GRACE, Allocations, Pods

log = logging.getLogger(__name__)

# A sync that crashed without letting go frees the cluster after this long.
SYNC_LEASE = timedelta(seconds=30)
FOLLOWER_RECORDS_EVERY = timedelta(seconds=2)
NS = NamespaceRequest.State
CS = ClaimRequest.State
FOLLOWED_CLAIMS = (CS.WAITING, CS.IN_USE)
# How often the Events of a run's pending Pod are read again, and how many are kept.
POD_WARNINGS_EVERY = timedelta(seconds=10)
POD_WARNINGS_KEPT = 5
S = TypeVar("S")


@dataclass
class Listed(Generic[S]):
    """The objects of one kind the cluster held, and when it held exactly those."""

    items: list[S]
    at: datetime


class ClusterLists(Protocol):
    def claims(self) -> Listed[ClaimState]: ...

    def pods(self) -> Listed[PodState]: ...

    def follow_logs(self, runs: list[VerificationRun], pods: Pods) -> frozenset[tuple[int, str]]:
        """Stream the logs of the runs' running containers where it can (the streams of
        containers that ended are stopped and flushed first); the (run id, container) it
        streams, which the sync does not read."""
        ...


class LiveLists:
    """Straight from the API server: one list call per kind (the periodic sync)."""

    def __init__(self, gateway: ClusterGateway) -> None:
        self.gateway = gateway

    def claims(self) -> Listed[ClaimState]:
        at = timezone.now()
        return Listed(self.gateway.list_claims(managed_selector()), at)

    def pods(self) -> Listed[PodState]:
        at = timezone.now()
        return Listed(self.gateway.list_pods(managed_selector()), at)

    def follow_logs(self, runs: list[VerificationRun], pods: Pods) -> frozenset[tuple[int, str]]:
        return frozenset()


def sync_cluster(cluster: Cluster, *, follow_for: float = 0) -> bool:
    """Sync once; False when another worker is already syncing this cluster.

    While verification runs are under way, keep syncing every RUN_FOLLOW_INTERVAL_SECONDS
    for up to follow_for seconds: a short Pod holds its GPU only briefly, and the person
    watching the run should see that allocation.
    """
    deadline = time.monotonic() + follow_for
    with _sync_lease(cluster) as held:
        if held:
            Cluster.objects.filter(pk=cluster.pk).update(polled_at=timezone.now())
            while _sync_cycle(cluster) and time.monotonic() < deadline:
                time.sleep(settings.RUN_FOLLOW_INTERVAL_SECONDS)
    return held


def sync_from(cluster: Cluster, lists: ClusterLists) -> bool | None:
    """One pass over what lists hold (the follower's caches): True while runs are under way,
    None when another worker holds the sync."""
    with _sync_lease(cluster) as held:
        return _sync_cycle(cluster, lists, record_every=FOLLOWER_RECORDS_EVERY) if held else None


@contextmanager
def _sync_lease(cluster: Cluster) -> Iterator[bool]:
    started = timezone.now()
    free = Q(sync_started_at__isnull=True) | Q(sync_started_at__lt=started - SYNC_LEASE)
    if not Cluster.objects.filter(free, pk=cluster.pk).update(sync_started_at=started):
        yield False
        return
    try:
        yield True
    finally:
        Cluster.objects.filter(pk=cluster.pk, sync_started_at=started).update(sync_started_at=None)


def _sync_cycle(
    cluster: Cluster, lists: ClusterLists | None = None, *, record_every: timedelta | None = None
) -> bool:
    """One pass over claims and runs; True while runs are still under way.

    Each part stands alone: a list that fails, a log that cannot be read or one broken run is
    recorded (on the cluster or the run) and the other parts go on.
    """
    gateway = gateway_for(cluster)
    lists = lists or LiveLists(gateway)
    problems: list[str] = []
    if _inventory_is_stale(cluster):
        _attempt(problems, "inventory", lambda: refresh_inventory(cluster, gateway))
    runs, awaiting = run_follower.followed_runs(cluster)
    # Pods first, claims right after: a Pod seen bound still holds its allocation then,
    # so the devices of a run are recorded in the first cycle that sees its Pod scheduled.
    pods = (
        _attempt(problems, "Pods", lists.pods) if runs or awaiting else Listed([], timezone.now())
    )
    allocations = _attempt(
        problems, "ResourceClaims", lambda: _sync_claims(cluster, gateway, lists)
    )
    if pods is not None:
        by_name = {(pod.namespace, pod.name): pod for pod in pods.items}
        streamed = lists.follow_logs(runs, by_name)
        problems += run_follower.follow_runs(
            runs, by_name, pods.at, gateway, allocations or {}, streamed
        )
        problems += run_follower.retry_logs(awaiting, by_name, gateway)
        read_pod_warnings(runs, by_name, gateway)
    _record_outcome(cluster, problems, record_every)
    return not problems and any(not run.is_final for run in runs)


def read_pod_warnings(runs: list[VerificationRun], pods: Pods, gateway: ClusterGateway) -> None:
    """The latest Warning Events of each pending run's Pod, kept on the run for the page that
    says why it waits: one list call per pending Pod and POD_WARNINGS_EVERY, however many
    people look. Extra, like logs: a cluster that refuses it only costs the explanation."""
    due = timezone.now() - POD_WARNINGS_EVERY
    for run in runs:
        pod = pods.get((run.claim.namespace, run.pod_name))
        if pod is None or pod.phase != "Pending" or run.is_final:
            continue
        if run.pod_warnings_read_at and run.pod_warnings_read_at > due:
            continue
        try:
            found = gateway.list_pod_warnings(pod.namespace, pod.name, run.pod_uid)
        except KubeError as error:
            log.warning("events of %s/%s: %s", pod.namespace, pod.name, error)
            continue
        # Once bound, the scheduler's old complaints no longer hold.
        current = [e for e in found if not (pod.node and e.reason == "FailedScheduling")]
        kept = [asdict(event) for event in current[:POD_WARNINGS_KEPT]]
        observations.run_pod_warnings_seen(run=run, warnings=kept)


T = TypeVar("T")


def _attempt(problems: list[str], what: str, call: Callable[[], T]) -> T | None:
    """call(), or None with the cluster's words added to problems when the cluster refused."""
    try:
        return call()
    except KubeError as error:
        log.warning("sync: %s: %s", what, error)
        problems.append(f"{what}: {error.message}")
        return None


def _record_outcome(cluster: Cluster, problems: list[str], every: timedelta | None) -> None:
    """The cluster's error, or the time of a good sync: a follower passes many times a
    second while runs go, so its good passes are written at most `every` (not at each)."""
    now = timezone.now()
    if problems:
        cluster_registry.record_problem(cluster.pk, "; ".join(problems))
        return
    last = cluster.last_synced_at
    if every and not cluster.last_error and last and now - last < every:
        return
    # A pass without problems may have asked the cluster nothing (a follower's pass reads its
    # caches; a sync with nothing to follow lists nothing), so it says nothing of whether the
    # cluster answers: a cluster marked unreachable stays so, with its reason, until an
    # inventory read since the outage began (then it is reachable again, as
    # cluster_registry.note_sync_outcome says too), the follower or a check finds it answers.
    answered = Q(unreachable_since__isnull=True) | Q(
        inventory_synced_at__gte=F("unreachable_since")
    )
    rows = Cluster.objects.filter(answered, pk=cluster.pk)
    if rows.update(last_synced_at=now, last_error="", unreachable_since=None):
        cluster.last_synced_at, cluster.last_error, cluster.unreachable_since = now, "", None


def _inventory_is_stale(cluster: Cluster) -> bool:
    if not cluster.inventory_synced_at or not cluster.inventory.get("device_classes"):
        return True
    age = timezone.now() - cluster.inventory_synced_at
    return age > timedelta(seconds=settings.INVENTORY_REFRESH_SECONDS)


def refresh_inventory(cluster: Cluster, gateway: ClusterGateway | None = None) -> None:
    """Discovery (versions) plus device classes and devices from the ResourceSlices."""
    gateway = gateway or gateway_for(cluster)
    info = gateway.discover()
    cluster.server_version = info.server_version
    cluster.resource_versions = info.resource_versions
    cluster.preferred_resource_version = info.preferred_resource_version or ""
    if cluster.preferred_resource_version:
        classes, devices = gateway.list_device_classes(), gateway.list_devices()
        cluster.inventory = inventory.build_inventory(classes, devices)
    else:
        cluster.inventory = {}
    cluster.inventory_synced_at = timezone.now()
    cluster.save(
        update_fields=[
            "server_version",
            "resource_versions",
            "preferred_resource_version",
            "inventory",
            "inventory_synced_at",
        ]
    )


def inventory_seen(
    cluster: Cluster, classes: list[DeviceClassInfo], devices: list[DeviceInfo]
) -> bool:
    """The device classes and devices the follower's caches hold; True when they changed."""
    built = inventory.build_inventory(classes, devices)
    now = timezone.now()
    Cluster.objects.filter(pk=cluster.pk).update(inventory=built, inventory_synced_at=now)
    changed, cluster.inventory, cluster.inventory_synced_at = built != cluster.inventory, built, now
    return changed


def _sync_claims(cluster: Cluster, gateway: ClusterGateway, lists: ClusterLists) -> Allocations:
    """Follow allocation of every applied claim; returns claim id → (now, before).

    A pass reads a few columns of each followed claim and loads whole rows only for those
    whose allocation or presence changed: with a thousand followed, a Pod's change must not
    cost a thousand model instances."""
    followed = ClaimRequest.objects.filter(
        namespace_request__cluster=cluster, state__in=FOLLOWED_CLAIMS
    )
    fields = ("pk", "namespace_request__name", "name", "state", "allocation", "applied_at")
    rows = list(followed.values_list(*fields))
    if not rows:
        return {}
    listed = lists.claims()
    observed = {(c.namespace, c.name): c for c in listed.items}
    allocations: Allocations = {}
    seen: dict[int, dict[str, Any] | None] = {}
    missing: list[int] = []
    for pk, namespace, name, state, stored, applied_at in rows:
        found = observed.get((namespace, name))
        if found is None:
            if applied_at and applied_at < listed.at - GONE_GRACE:
                missing.append(pk)
            continue
        allocation = _allocation(cluster, found)
        allocations[pk] = (allocation, stored)
        if _allocation_changes(state, stored, allocation):
            seen[pk] = allocation
    if not (seen or missing):
        return allocations
    changed = followed.filter(pk__in=[*seen, *missing]).select_related("namespace_request")
    for claim in changed:
        if claim.pk in seen:
            observations.claim_allocation_seen(claim_request=claim, allocation=seen[claim.pk])
        else:
            _claim_missing(claim, listed.at, gateway)
    return allocations


def _allocation_changes(state: str, stored: Any, allocation: dict[str, Any] | None) -> bool:
    """Whether observations.claim_allocation_seen would write anything."""
    if state == CS.WAITING and allocation:
        return True
    if state == CS.IN_USE and not allocation:
        return True
    return stored != allocation


def _claim_missing(claim: ClaimRequest, listed_at: Any, gateway: ClusterGateway) -> None:
    """Not in the labelled list: relabelled (our uid: put the labels back) or deleted outside
    the portal (apply it again); docs/operations.md."""
    if not claim.applied_at or claim.applied_at >= listed_at - GONE_GRACE:
        return
    api_version = claim.applied_api_version or gateway.claim_api_version()
    found = gateway.read(api_version, "ResourceClaim", claim.namespace, claim.name)
    if found and claim.kube_uid and uid_of(found) == claim.kube_uid:
        gateway.apply(claim.applied_manifest or cluster_ops.claim_manifest(claim, api_version))
        observations.labels_restored(obj=claim, message=state_messages.CLAIM_LABELS_RESTORED)
        return
    message = state_messages.CLAIM_DELETED_OUTSIDE
    observations.claim_drifted(claim_request=claim, message=message)


def _allocation(cluster: Cluster, state: ClaimState) -> dict[str, Any] | None:
    if not state.allocated:
        return None
    devices = [asdict(device) for device in state.devices]
    return {
        "node": state.node or "",
        "devices": inventory.describe_devices(cluster.inventory, devices),
        "reserved_for": list(state.reserved_for),
    }
