"""The queue's cluster side: work on a claim that does not fit now waits (claims/worker/
queue_turn.py decides: Jobs are created suspended, notebooks' and runs' Pods not created yet)
and is started in queue order (claims/read/queue.py) as devices free up, as Kueue does. On a
cluster that runs Kueue the portal stands back: every Job is created suspended in the team's
LocalQueue and Kueue resumes it (claims/worker/kueue_steps.py follows what Kueue says).

Claims start in queue order while their devices are free once those ahead have theirs
(queue.admitted_in_order); the first that does not fit stays the head until it has its
devices, so no claim behind it takes what the head waits for. The
waiting work of a claim that has its devices (another Pod got them for it) starts at once. Run
by the sync on every pass of the cluster loop; safe to run twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from claims.clusters.gateways import gateway_for
from claims.domain import state_messages
from claims.domain import workload_observations as observed
from claims.kube.gateway import ClusterGateway, KubeError
from claims.models import ClaimRequest, Cluster, VerificationRun, Workload, WorkloadKind
from claims.read import queue
from claims.worker import cluster_steps, queue_turn, workload_steps

log = logging.getLogger(__name__)
WS, RS, CS = Workload.State, VerificationRun.State, ClaimRequest.State
HELD = queue_turn.HELD


def start_waiting(cluster: Cluster, gateway: ClusterGateway | None = None) -> list[str]:
    """Start what may start now: the waiting work of claims that have their devices, and of
    each queue's head when its devices are free. Problems are returned, as the sync's."""
    if cluster.kueue:
        return []  # Kueue queues here: the portal stands back
    on_cluster = {"claim__namespace_request__cluster": cluster}
    suspended = Workload.objects.filter(suspended=True, state__in=HELD, **on_cluster)
    # Only runs the queue held (queue_turn): a run just queued is its start task's to decide.
    held_runs = VerificationRun.objects.filter(
        state=RS.QUEUED,
        state_message=state_messages.WAITS_ITS_TURN,
        claim__state__in=(CS.WAITING, CS.IN_USE),
        **on_cluster,
    )
    claim_ids = set(suspended.values_list("claim_id", flat=True))
    claim_ids |= set(held_runs.values_list("claim_id", flat=True))
    if not claim_ids:
        return []
    gateway = gateway or gateway_for(cluster)
    problems: list[str] = []
    may_start = queue.startable(cluster)
    claims = ClaimRequest.objects.filter(pk__in=claim_ids).select_related("namespace_request")
    for claim in claims:
        turn = claim.pk in may_start
        if claim.allocation or (turn and not queue_turn.pods_on_the_way(claim)):
            # The head's waiting work all goes at once: it shares the claim.
            _start_claim(gateway, claim, problems)
    return problems


def _start_claim(gateway: ClusterGateway, claim: ClaimRequest, problems: list[str]) -> None:
    held = claim.runs.filter(state=RS.QUEUED, state_message=state_messages.WAITS_ITS_TURN)
    for run in held.order_by("pk"):
        run.claim = claim
        _start(partial(cluster_steps.start_run, run), f"run {run}", problems)
    for workload in claim.workloads.filter(suspended=True, state__in=HELD).order_by("pk"):
        workload.claim = claim
        if workload.kind == WorkloadKind.JOB:
            _resume(gateway, workload, problems)
        else:  # a notebook not created yet: created now (its state is applying)
            start = partial(workload_steps.start_workload, workload, resume=True)
            _start(start, f"workload {workload}", problems)


def _start(step: Callable[[], None], what: str, problems: list[str]) -> None:
    try:
        step()
    except KubeError as error:
        log.warning("starting %s: %s", what, error)
        problems.append(f"{what}: {error.message}")


def _resume(gateway: ClusterGateway, workload: Workload, problems: list[str]) -> None:
    if not workload.kube_uid:
        return  # not created yet: its start (or the reconciler's resend) decides again
    try:
        gateway.resume_job(workload.claim.namespace, workload.name)
    except KubeError as error:
        log.warning("resuming %s: %s", workload, error)
        problems.append(f"workload {workload}: {error.message}")
        return
    observed.workload_resumed(workload=workload)
    workload.suspended = False
