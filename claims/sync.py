"""Bring the database up to date with the cluster, and finish work whose message was lost.

The sync costs a fixed number of API calls per cluster and cycle, whatever the number of
claims: one list of claims and one list of Pods by label, plus logs only for Pods that are
running or just finished (and discovery + inventory now and then).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from claims import inventory, observations
from claims.cluster_ops import gateway_for
from claims.kube.gateway import ClaimState, ClusterGateway, KubeError, PodState
from claims.kube.ownership import delete_owned
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    RunLog,
    VerificationRun,
    managed_selector,
)

log = logging.getLogger(__name__)

# A Pod or claim missing from a list is only "gone" once it had time to appear.
GONE_GRACE = timedelta(seconds=15)
# A sync that crashed without letting go frees the cluster after this long.
SYNC_LEASE = timedelta(seconds=30)
NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State
FOLLOWED_CLAIMS = (CS.WAITING, CS.IN_USE)
FOLLOWED_RUNS = (RS.CREATING, RS.PENDING, RS.RUNNING)


def sync_cluster(cluster: Cluster, *, follow_for: float = 0) -> bool:
    """Sync once; False when another worker is already syncing this cluster.

    While verification runs are under way, keep syncing every RUN_FOLLOW_INTERVAL_SECONDS
    for up to follow_for seconds: a short Pod holds its GPU only briefly, and the person
    watching the run should see that allocation.
    """
    started = timezone.now()
    free = Q(sync_started_at__isnull=True) | Q(sync_started_at__lt=started - SYNC_LEASE)
    if not Cluster.objects.filter(free, pk=cluster.pk).update(sync_started_at=started):
        return False
    deadline = time.monotonic() + follow_for
    try:
        while _sync_cycle(cluster) and time.monotonic() < deadline:
            time.sleep(settings.RUN_FOLLOW_INTERVAL_SECONDS)
    finally:
        Cluster.objects.filter(pk=cluster.pk, sync_started_at=started).update(sync_started_at=None)
    return True


def _sync_cycle(cluster: Cluster) -> bool:
    """One pass over claims and runs; True while runs are still under way."""
    gateway = gateway_for(cluster)
    try:
        if _inventory_is_stale(cluster):
            refresh_inventory(cluster, gateway)
        runs = _followed_runs(cluster)
        # Pods first, claims right after: a Pod seen bound still holds its allocation then,
        # so the devices of a run are recorded in the first cycle that sees its Pod scheduled.
        pods_listed_at = timezone.now()
        pods = _list_pods(gateway) if runs else {}
        allocations = _sync_claims(cluster, gateway)
        _sync_runs(runs, pods, pods_listed_at, gateway, allocations)
    except KubeError as error:
        log.warning("sync of %s: %s", cluster, error)
        Cluster.objects.filter(pk=cluster.pk).update(last_error=error.message)
        return False
    Cluster.objects.filter(pk=cluster.pk).update(last_synced_at=timezone.now(), last_error="")
    return any(not run.is_final for run in runs)


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


Allocations = dict[int, tuple[dict | None, dict | None]]


def _sync_claims(cluster: Cluster, gateway: ClusterGateway) -> Allocations:
    """Follow allocation of every applied claim; returns claim id → (now, before)."""
    claims = list(
        ClaimRequest.objects.filter(
            namespace_request__cluster=cluster, state__in=FOLLOWED_CLAIMS
        ).select_related("namespace_request")
    )
    if not claims:
        return {}
    listed_at = timezone.now()
    observed = {(c.namespace, c.name): c for c in gateway.list_claims(managed_selector())}
    allocations: Allocations = {}
    for claim in claims:
        state = observed.get((claim.namespace, claim.name))
        if state is None:
            _claim_missing(claim, listed_at)
            continue
        allocation = _allocation(cluster, state)
        allocations[claim.pk] = (allocation, claim.allocation)
        observations.claim_allocation_seen(claim_request=claim, allocation=allocation)
    return allocations


def _claim_missing(claim: ClaimRequest, listed_at: Any) -> None:
    """Deleted (or relabelled) outside the portal: apply it again (docs/operations.md)."""
    if claim.applied_at and claim.applied_at < listed_at - GONE_GRACE:
        message = "The ResourceClaim was deleted or changed outside the portal."
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


def _followed_runs(cluster: Cluster) -> list[VerificationRun]:
    return list(
        VerificationRun.objects.filter(
            claim__namespace_request__cluster=cluster, state__in=FOLLOWED_RUNS
        ).select_related("claim__namespace_request")
    )


Pods = dict[tuple[str, str], PodState]


def _list_pods(gateway: ClusterGateway) -> Pods:
    return {(p.namespace, p.name): p for p in gateway.list_pods(managed_selector())}


def _sync_runs(
    runs: list[VerificationRun],
    pods: Pods,
    listed_at: Any,
    gateway: ClusterGateway,
    allocations: Allocations,
) -> None:
    for run in runs:
        pod = pods.get((run.claim.namespace, run.pod_name))
        if pod is None:
            _pod_missing(run, listed_at)
            continue
        now, before = allocations.get(run.claim_id, (None, None))
        _follow_pod(run, pod, gateway, _devices_of(run, pod, now, before))


def _devices_of(
    run: VerificationRun, pod: PodState, now: dict | None, before: dict | None
) -> list | None:
    """The devices the run's Pod got: the claim's allocation now, or the one seen before if it
    was reserved for this Pod (a short Pod may have given its GPU back by this look)."""
    if not pod.node:
        return None
    if now:
        return now["devices"]
    if before and run.pod_name in before.get("reserved_for", []):
        return before.get("devices")
    return None


def _pod_missing(run: VerificationRun, listed_at: Any) -> None:
    if run.state != RS.CREATING and run.updated < listed_at - GONE_GRACE:
        observations.run_failed(run=run, message="The Pod is no longer in the cluster.")


def _follow_pod(
    run: VerificationRun, pod: PodState, gateway: ClusterGateway, devices: list | None
) -> None:
    message = pod.message or pod.reason
    if pod.phase == "Pending" and _pending_too_long(run):
        _give_up_pending(run, pod, gateway)
        return
    observations.run_pod_observed(
        run=run,
        phase=pod.phase,
        node=pod.node,
        message=message,
        devices=devices,
        started_at=pod.started_at,
    )
    if pod.phase in ("Running", "Succeeded", "Failed"):
        _fetch_logs(run, pod, gateway)
    if pod.phase in ("Succeeded", "Failed"):
        observations.run_finished(run=run, phase=pod.phase, message=_failure_message(pod))


def _pending_too_long(run: VerificationRun) -> bool:
    limit = timedelta(seconds=settings.RUN_PENDING_TIMEOUT_SECONDS)
    return run.created < timezone.now() - limit


def _give_up_pending(run: VerificationRun, pod: PodState, gateway: ClusterGateway) -> None:
    """A Pod that never starts (image never pulled, never scheduled) holds a claim and is
    followed for ever: delete it, and fail the run with the cluster's reason."""
    limit = settings.RUN_PENDING_TIMEOUT_SECONDS
    reason = _pending_reason(pod) or "no reason given by the cluster"
    message = f"The Pod did not start within {limit} seconds: {reason}"
    if observations.run_failed(run=run, message=message):
        namespace, labels = run.claim.namespace, run.labels()
        delete_owned(gateway, "v1", "Pod", namespace, pod.name, uid=run.pod_uid, labels=labels)


def _pending_reason(pod: PodState) -> str:
    """ErrImagePull / ImagePullBackOff of a container, else the scheduler's words."""
    waiting = [c for c in pod.containers if c.state == "waiting" and c.reason]
    for container in waiting:
        if container.reason not in ("ContainerCreating", "PodInitializing"):
            detail = f" ({container.message})" if container.message else ""
            return f"{container.name}: {container.reason}{detail}"
    return " ".join(part for part in (pod.reason, pod.message) if part)


def _fetch_logs(run: VerificationRun, pod: PodState, gateway: ClusterGateway) -> None:
    """Only what came after the last line kept, for containers that have started."""
    started = {c.name for c in pod.containers if c.state in ("running", "terminated")}
    kept = {log.container: log.last_timestamp for log in RunLog.objects.filter(run=run)}
    for container in VerificationRun.CONTAINERS:
        if container not in started:
            continue
        lines = gateway.read_log(
            pod.namespace,
            pod.name,
            container,
            since=kept.get(container),
            limit_bytes=settings.RUN_LOG_MAX_BYTES,
        )
        pairs = [(line.timestamp, line.text) for line in lines]
        observations.run_logs_appended(run=run, container=container, lines=pairs)


def _failure_message(pod: PodState) -> str:
    failed = [c for c in pod.containers if c.exit_code not in (None, 0)]
    if failed:
        parts = [f"{c.name} exited with {c.exit_code} ({c.reason or 'Error'})" for c in failed]
        return "; ".join(parts) + "."
    return pod.message or pod.reason
