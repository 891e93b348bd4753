"""Bring the database up to date with what a cluster holds: allocations, Pods, logs.

A pass reads a ClusterView (claims/worker/cluster_view.py): the cluster loop's caches, where
it costs no request, or live lists for a one-off look (one list of claims and one of Pods by
label). Beyond those it reads logs only for Pods that are running or just finished, and the
Events of a Pod that is pending, at most once per POD_WARNINGS_EVERY for each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from claims.clusters import registry as cluster_registry
from claims.clusters.gateways import gateway_for
from claims.domain import observations, run_observations, state_messages
from claims.kube.gateway import (
    ClaimState,
    ClusterGateway,
    DeviceClassInfo,
    DeviceInfo,
    Holding,
    KubeError,
    TaintRule,
)
from claims.kube.ownership import uid_of
from claims.kube.resources import KUEUE_VERSION
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    outside_selector,
)
from claims.read import inventory, planned
from claims.worker import kueue_steps, lease, queue_steps, run_pods, workload_pods
from claims.worker.cluster_view import ClusterView, Listed, LiveView
from claims.worker.run_pods import GONE_GRACE, Allocations, Pods

log = logging.getLogger(__name__)

LOOP_RECORDS_EVERY = timedelta(seconds=2)
NS = NamespaceRequest.State
CS = ClaimRequest.State
FOLLOWED_CLAIMS = (CS.WAITING, CS.IN_USE)
# How often the Events of a run's pending Pod are read again, and how many are kept.
POD_WARNINGS_EVERY = timedelta(seconds=10)
POD_WARNINGS_KEPT = 5


def sync_cluster(cluster: Cluster) -> bool:
    """One pass from live lists, a one-off look (the shell, tests); False when the cluster's
    loop holds its lease (it keeps the cluster current itself)."""
    with lease.held_once(cluster.pk) as held:
        if held:
            cluster.refresh_from_db()  # as it is now, not as the caller read it
            _sync_cycle(cluster, LiveView(gateway_for(cluster)))
            cluster_registry.note_sync_outcome(cluster.pk)  # unreachable since ..., or not
    return held


def sync_from(cluster: Cluster, view: ClusterView) -> bool:
    """One pass over what view holds, by the holder of the cluster's lease: True while runs
    are under way."""
    return _sync_cycle(cluster, view, record_every=LOOP_RECORDS_EVERY)


def _sync_cycle(
    cluster: Cluster, view: ClusterView, *, record_every: timedelta | None = None
) -> bool:
    """One pass over claims and runs; True while runs are under way or logs are awaited.

    Each part stands alone: a list that fails, a log that cannot be read or one broken run is
    recorded (on the cluster or the run) and the other parts go on.
    """
    gateway = gateway_for(cluster)
    problems: list[str] = []
    if view.reads_inventory and _inventory_is_stale(cluster):
        _attempt(problems, "inventory", lambda: refresh_inventory(cluster, gateway))
    runs, awaiting = run_pods.followed_runs(cluster)
    workloads = workload_pods.followed_workloads(cluster)
    # Pods first, claims right after: a Pod seen bound still holds its allocation then,
    # so the devices of a run are recorded in the first cycle that sees its Pod scheduled.
    wanted = runs or awaiting or workloads
    pods = _attempt(problems, "Pods", view.pods) if wanted else Listed([], timezone.now())
    allocations = _attempt(problems, "ResourceClaims", lambda: _sync_claims(cluster, gateway, view))
    if pods is not None:
        by_name = {(pod.namespace, pod.name): pod for pod in pods.items}
        streamed = view.follow_logs(runs, by_name)
        running = workload_pods.current_pods(workloads, pods.items)
        streamed |= view.follow_workload_logs(running)
        read_pod_events(runs, by_name, gateway)  # first: what the kubelet said, for the follow
        problems += run_pods.follow_runs(
            runs, by_name, pods.at, gateway, allocations or {}, streamed
        )
        problems += run_pods.retry_logs(awaiting, by_name, gateway)
        jobs = _attempt(problems, "Jobs", view.jobs) if workloads else None
        problems += workload_pods.follow_workloads(
            workloads, pods.items, jobs, gateway, allocations or {}, streamed
        )
    # The queue: suspended Jobs start in order as devices free up (or, where Kueue runs,
    # what Kueue says of them).
    problems += queue_steps.start_waiting(cluster, gateway)
    if cluster.kueue and workloads:
        seen = _attempt(problems, "Kueue Workloads", view.kueue_workloads)
        kueue_steps.follow_kueue(cluster, workloads, seen, gateway)
    record_outcome(cluster, problems, record_every)
    # Logs still to read keep the passes coming too (their back-off decides when to ask), and
    # so do the logs of workloads that run.
    awaited = [run for run in awaiting + runs if run.log_retry_until]  # as they are now
    going = any(not run.is_final for run in runs) or any(not w.is_final for w in workloads)
    return not problems and (bool(awaited) or going)


def read_pod_events(runs: list[VerificationRun], pods: Pods, gateway: ClusterGateway) -> None:
    """The Events of each pending run's Pod: the latest Warnings, kept on the run for the page
    that says why it waits, and the kubelet's latest word on its containers (Pulling image
    ...), which says what a bound Pod is doing. One list call per pending Pod and
    POD_WARNINGS_EVERY (and one as soon as it is seen bound), however many people look.
    Extra, like logs: a cluster that refuses it only costs the explanation."""
    due = timezone.now() - POD_WARNINGS_EVERY
    for run in runs:
        pod = pods.get((run.claim.namespace, run.pod_name))
        if pod is None or pod.phase != "Pending" or run.is_final:
            continue
        just_bound = bool(pod.node) and pod.node != run.node
        if run.pod_warnings_read_at and run.pod_warnings_read_at > due and not just_bound:
            continue
        try:
            found = gateway.list_pod_events(pod.namespace, pod.name, run.pod_uid)
        except KubeError as error:
            log.warning("events of %s/%s: %s", pod.namespace, pod.name, error)
            continue
        warnings = [event for event in found if event.type == "Warning"]
        # Once bound, the scheduler's old complaints no longer hold.
        current = [e for e in warnings if not (pod.node and e.reason == "FailedScheduling")]
        kept = [event.as_warning() for event in current[:POD_WARNINGS_KEPT]]
        activity = next((e for e in found if e.reason in run_pods.KUBELET_PROGRESS), None)
        said = {"reason": activity.reason, "message": activity.message} if activity else {}
        run_observations.run_pod_events_seen(run=run, warnings=kept, activity=said)


T = TypeVar("T")


def _attempt(problems: list[str], what: str, call: Callable[[], T]) -> T | None:
    """call(), or None with the cluster's words added to problems when the cluster refused."""
    try:
        return call()
    except KubeError as error:
        log.warning("sync: %s: %s", what, error)
        problems.append(f"{what}: {error.message}")
        return None


def record_outcome(cluster: Cluster, problems: list[str], every: timedelta | None) -> None:
    """The cluster's error, or the time of a good sync: a loop passes many times a second
    while runs go, so its good passes are written at most `every` (not at each)."""
    now = timezone.now()
    if problems:
        cluster_registry.record_problem(cluster.pk, "; ".join(problems))
        return
    last = cluster.last_synced_at
    if every and not cluster.last_error and last and now - last < every:
        return
    cluster_registry.record_good_sync(cluster, now)


def _inventory_is_stale(cluster: Cluster) -> bool:
    if not cluster.inventory_synced_at or not cluster.inventory.get("device_classes"):
        return True
    age = timezone.now() - cluster.inventory_synced_at
    return age > timedelta(seconds=settings.INVENTORY_REFRESH_SECONDS)


def refresh_inventory(cluster: Cluster, gateway: ClusterGateway | None = None) -> None:
    """Discovery (versions) plus device classes and devices from the ResourceSlices, and
    what claims made outside the portal hold."""
    gateway = gateway or gateway_for(cluster)
    discovery_seen(cluster, gateway)
    built = {}  # a cluster without DRA has none
    if cluster.preferred_resource_version:
        classes, devices = gateway.list_device_classes(), gateway.list_devices()
        outside = gateway.list_holdings(outside_selector())
        rules = gateway.list_taint_rules()
        built = inventory.build_inventory(classes, devices, outside, rules)
    _store_inventory(cluster, built)


def discovery_seen(cluster: Cluster, gateway: ClusterGateway) -> None:
    """The server's version and the resource.k8s.io versions it serves, written when they
    changed (the loop asks now and then: an upgrade of the control plane changes them)."""
    info = gateway.discover()
    seen = {
        "server_version": info.server_version,
        "resource_versions": info.resource_versions,
        "preferred_resource_version": info.preferred_resource_version or "",
        "kueue": KUEUE_VERSION in info.kueue_versions,
        "kueue_visibility": KUEUE_VERSION in info.kueue_visibility_versions,
    }
    changed = {field: value for field, value in seen.items() if getattr(cluster, field) != value}
    if changed:
        Cluster.objects.filter(pk=cluster.pk).update(**changed)
        for field, value in changed.items():
            setattr(cluster, field, value)


def inventory_seen(
    cluster: Cluster,
    classes: list[DeviceClassInfo],
    devices: list[DeviceInfo],
    outside: list[Holding],
    taint_rules: list[TaintRule] | None = None,
) -> bool:
    """The device classes, devices, holdings outside the portal and DeviceTaintRules the
    loop's caches hold; True when they changed."""
    built = inventory.build_inventory(classes, devices, outside, taint_rules)
    return _store_inventory(cluster, built)


def _store_inventory(cluster: Cluster, built: dict[str, Any]) -> bool:
    now = timezone.now()
    Cluster.objects.filter(pk=cluster.pk).update(inventory=built, inventory_synced_at=now)
    changed, cluster.inventory, cluster.inventory_synced_at = built != cluster.inventory, built, now
    return changed


def _sync_claims(cluster: Cluster, gateway: ClusterGateway, view: ClusterView) -> Allocations:
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
    listed = view.claims()
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
        gateway.apply(claim.applied_manifest or planned.claim_manifest(claim, api_version))
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
