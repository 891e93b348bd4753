"""The queue's cluster side: Jobs of a claim that does not fit now are created suspended and
resumed in queue order (claims/read/queue.py) as devices free up, as Kueue does. On a cluster
that runs Kueue the portal stands back: every Job is created suspended in the team's LocalQueue
and Kueue resumes it (claims/worker/kueue_steps.py follows what Kueue says).

Only each group's head is resumed, and only when its devices are free now: until the head has
its devices it stays the head, so the next claim never takes what the head waits for. A Job of
a claim that has its devices (another Pod got them for it) is resumed at once. Run by the sync
on every pass of the cluster loop; safe to run twice.
"""

from __future__ import annotations

import logging

from claims.clusters.gateways import gateway_for
from claims.domain import workload_observations as observed
from claims.kube.gateway import ClusterGateway, KubeError
from claims.models import ClaimRequest, Cluster, VerificationRun, Workload, WorkloadKind
from claims.read import queue

log = logging.getLogger(__name__)
WS, RS = Workload.State, VerificationRun.State
HELD = (WS.APPLYING, WS.STARTED)


def _pods_on_the_way(claim: ClaimRequest) -> bool:
    """A Pod of the claim (a run's, an unsuspended workload's) already asks the scheduler."""
    workloads = claim.workloads.filter(state__in=HELD, suspended=False)
    return workloads.exists() or claim.runs.filter(state=RS.PENDING).exists()


def job_must_wait(workload: Workload) -> bool:
    """Whether the workload's Job is created suspended (and marked so): its claim has no
    devices, no Pod of it asks for them yet, and it is not the head of its queue with its
    devices free. A notebook is not held (it has no suspend)."""
    claim = workload.claim
    if workload.kind == WorkloadKind.JOB and claim.cluster.kueue:
        return True  # Kueue's to admit: it unsuspends the Job (claims/worker/kueue_steps.py)
    if workload.kind != WorkloadKind.JOB or claim.allocation:
        return False
    other_pods = claim.workloads.filter(state__in=HELD, suspended=False).exclude(pk=workload.pk)
    if other_pods.exists() or claim.runs.filter(state=RS.PENDING).exists():
        return False  # they share the claim: whatever devices it gets, this Job gets too
    spot = queue.spot_of(claim)
    if spot is not None and spot.position == 1 and spot.fits_now:
        return False
    observed.workload_suspended(workload=workload)
    return True


def start_waiting(cluster: Cluster, gateway: ClusterGateway | None = None) -> list[str]:
    """Resume what may start now: the suspended Jobs of claims that have their devices, and of
    each queue's head when its devices are free. Problems are returned, as the sync's."""
    if cluster.kueue:
        return []  # Kueue queues here: the portal stands back
    gateway = gateway or gateway_for(cluster)
    suspended = Workload.objects.filter(
        suspended=True, state__in=HELD, claim__namespace_request__cluster=cluster
    ).select_related("claim__namespace_request")
    if not suspended:
        return []
    problems: list[str] = []
    spots = queue.queue_of(cluster)
    for workload in suspended:
        claim = workload.claim
        spot = spots.get(claim.pk)
        if claim.allocation:
            _resume(gateway, workload, problems)
        elif spot and spot.position == 1 and spot.fits_now and not _pods_on_the_way(claim):
            # The head's Jobs all go at once: they share its claim.
            for job in claim.workloads.filter(suspended=True, state__in=HELD):
                job.claim = claim
                _resume(gateway, job, problems)
    return problems


def _resume(gateway: ClusterGateway, workload: Workload, problems: list[str]) -> None:
    if not workload.suspended:
        return
    try:
        gateway.resume_job(workload.claim.namespace, workload.name)
    except KubeError as error:
        log.warning("resuming %s: %s", workload, error)
        problems.append(f"workload {workload}: {error.message}")
        return
    observed.workload_resumed(workload=workload)
    workload.suspended = False
