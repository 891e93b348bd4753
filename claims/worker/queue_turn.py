"""Whose turn it is: whether new work on a claim waits in the queue (claims/read/queue.py) or
goes to the cluster now. One rule for a Job, a notebook and a verification run.

Work waits when its claim has no devices, nothing of the claim already asks the scheduler for
them (a pending run's Pod, an unsuspended workload: whatever devices the claim gets, this work
shares), and its devices are not free now once the claims ahead of it in its queue have theirs
(claims/read/queue.py admitted_in_order, Kueue's StrictFIFO: the head, and those behind it while
they fit too; nothing behind a head that does not fit starts). A waiting Job is
created suspended; a waiting notebook or run is not created at all (a Pod has no suspend) and
stays in the database (the workload applying, the run queued) until claims/worker/queue_steps.py
starts it in queue order, or the reconciler sends it again and this rule is asked again: nothing
is lost when the worker restarts mid-wait.
"""

from __future__ import annotations

from claims.domain import run_observations
from claims.domain import workload_observations as observed
from claims.models import ClaimRequest, VerificationRun, Workload, WorkloadKind
from claims.read import queue

WS, RS = Workload.State, VerificationRun.State
HELD = (WS.APPLYING, WS.STARTED)


def pods_on_the_way(
    claim: ClaimRequest, *, workload: Workload | None = None, run: VerificationRun | None = None
) -> bool:
    """A Pod of the claim (a pending run's, an unsuspended workload's) already asks the
    scheduler; `workload` and `run` (the work being decided) left out."""
    workloads = claim.workloads.filter(state__in=HELD, suspended=False)
    runs = claim.runs.filter(state__in=(RS.CREATING, RS.PENDING))
    if workload is not None:
        workloads = workloads.exclude(pk=workload.pk)
    if run is not None:
        runs = runs.exclude(pk=run.pk)
    return workloads.exists() or runs.exists()


def its_turn(claim: ClaimRequest) -> bool:
    """The claim's devices are free now once the claims ahead of it in its queue have theirs
    (queue.admitted_in_order: the head, and those behind it while they fit too), or it can
    never fit on the cluster (waiting would never end: the scheduler says why)."""
    return claim.pk in queue.startable(claim.namespace_request.cluster)


def _must_wait(
    claim: ClaimRequest, *, workload: Workload | None = None, run: VerificationRun | None = None
) -> bool:
    if claim.allocation or pods_on_the_way(claim, workload=workload, run=run):
        return False
    return not its_turn(claim)


def workload_must_wait(workload: Workload) -> bool:
    """Whether the workload waits (and is marked so): its Job is created suspended, its
    notebook not created yet. Where the cluster runs Kueue, Kueue queues: every Job is created
    suspended for it to admit (claims/worker/kueue_steps.py), a notebook goes at once (its Pod
    carries the LocalQueue label for Kueue's pod integration)."""
    if workload.claim.cluster.kueue:
        return workload.kind == WorkloadKind.JOB
    if not _must_wait(workload.claim, workload=workload):
        if workload.suspended and not workload.kube_uid:
            observed.workload_turn_came(workload=workload)
        return False
    observed.workload_suspended(workload=workload)
    return True


def run_must_wait(run: VerificationRun) -> bool:
    """Whether the run's Pod waits to be created (the run stays queued, marked so); not where
    Kueue queues (the portal stands back there)."""
    if run.claim.cluster.kueue or not _must_wait(run.claim, run=run):
        return False
    run_observations.run_waits_in_queue(run=run)
    return True
