"""Follow the Pods of verification runs: a run's state comes from its Pod, its logs are extra.

Reading a log goes through the kubelet, which a real API server may fail to reach (node
NotReady, certificates: 500 "no preferred addresses found"). Such a failure is noted on the
run in the cluster's words and never stops the run, or any other, from following its Pod; a
finished run whose logs could not be read is tried again for LOG_RETRY, each container, less
and less often (1, 2, 4 ... s apart, at most a minute), whether or not other runs go on.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from claims.domain import run_observations, state_messages
from claims.kube.gateway import ClusterGateway, KubeError, PodState
from claims.kube.ownership import delete_owned
from claims.models import Cluster, RunLog, VerificationRun

log = logging.getLogger(__name__)

# A Pod or claim missing from a list is only "gone" once it had time to appear.
GONE_GRACE = timedelta(seconds=15)
# How long the logs of a finished run are tried again when they could not be read.
LOG_RETRY = timedelta(minutes=10)
RS = VerificationRun.State
FOLLOWED_RUNS = (RS.CREATING, RS.PENDING, RS.RUNNING)
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")
# The kubelet's Normal Events on the way from bound to running (pkg/kubelet/events).
KUBELET_PROGRESS = ("Pulling", "Pulled", "Created", "Started")
STAGE = VerificationRun.PodStage

Pods = dict[tuple[str, str], PodState]
Allocations = dict[int, tuple[dict | None, dict | None]]
Streamed = frozenset[tuple[int, str]]


def followed_runs(cluster: Cluster) -> tuple[list[VerificationRun], list[VerificationRun]]:
    """The runs under way, and the finished runs whose logs could not be read yet (one query:
    each pass of the follower asks)."""
    rows = VerificationRun.objects.filter(
        Q(state__in=FOLLOWED_RUNS) | Q(log_retry_until__isnull=False),
        claim__namespace_request__cluster=cluster,
    ).select_related("claim__namespace_request")
    # The claim only names the Pod's namespace here: none of its JSON.
    rows = rows.defer("claim__applied_manifest", "claim__allocation")
    runs, awaiting = [], []
    for run in rows:
        if run.state in FOLLOWED_RUNS:
            runs.append(run)
        if run.log_retry_until is not None:
            awaiting.append(run)
    return runs, awaiting


def follow_runs(
    runs: list[VerificationRun],
    pods: Pods,
    listed_at: Any,
    gateway: ClusterGateway,
    allocations: Allocations,
    streamed: Streamed = frozenset(),
) -> list[str]:
    """Follow each run on its own; returns what went wrong, one line per broken run.

    streamed: (run id, container) whose log a follow stream is reading
    (claims/worker/log_streams.py): not read here as well."""
    problems = []
    for run in runs:
        try:
            _follow_run(run, pods, listed_at, gateway, allocations, streamed)
        except Exception as error:  # one broken run must not stop the others (nor the sync)
            log.exception("following run %s", run.pk)
            problems.append(f"run {run}: {getattr(error, 'message', None) or error}")
    return problems


def _follow_run(
    run: VerificationRun,
    pods: Pods,
    listed_at: Any,
    gateway: ClusterGateway,
    allocations: Allocations,
    streamed: Streamed,
) -> None:
    pod = pods.get((run.claim.namespace, run.pod_name))
    if pod is None:
        _pod_missing(run, listed_at)
        return
    now, before = allocations.get(run.claim_id, (None, None))
    _follow_pod(run, pod, gateway, devices_of(run.pod_name, pod, now, before), streamed)


def retry_logs(runs: list[VerificationRun], pods: Pods, gateway: ClusterGateway) -> list[str]:
    """Read again the logs of finished runs that could not be read; give up after a while."""
    problems = []
    for run in runs:
        pod = pods.get((run.claim.namespace, run.pod_name))
        try:
            _retry_logs_of(run, pod, gateway)
        except Exception as error:  # as in follow_runs
            log.exception("reading the logs of run %s again", run.pk)
            problems.append(f"run {run}: {getattr(error, 'message', None) or error}")
    return problems


def _retry_logs_of(run: VerificationRun, pod: PodState | None, gateway: ClusterGateway) -> None:
    if pod is None:
        run_observations.run_logs_given_up(run=run, reason=state_messages.POD_GONE)
        return
    problem = _fetch_logs(run, pod, gateway)  # None: not yet time to ask again
    if problem == "":
        run_observations.run_logs_recovered(run=run)
    elif run.log_retry_until and run.log_retry_until < timezone.now():
        last = problem or run.log_error
        run_observations.run_logs_given_up(
            run=run, reason=state_messages.STILL_UNREADABLE % {"problem": last}
        )
    elif problem is not None:
        run_observations.run_log_read(run=run, problem=problem)


def devices_of(pod_name: str, pod: PodState, now: dict | None, before: dict | None) -> list | None:
    """The devices the Pod got: the claim's allocation now, or the one seen before if it
    was reserved for this Pod (a short Pod may have given its GPU back by this look)."""
    if not pod.node:
        return None
    if now:
        return now["devices"]
    if before and pod_name in before.get("reserved_for", []):
        return before.get("devices")
    return None


def _pod_missing(run: VerificationRun, listed_at: Any) -> None:
    if run.state != RS.CREATING and run.updated < listed_at - GONE_GRACE:
        run_observations.run_failed(run=run, message=state_messages.POD_NO_LONGER_THERE)


def _follow_pod(
    run: VerificationRun,
    pod: PodState,
    gateway: ClusterGateway,
    devices: list | None,
    streamed: Streamed,
) -> None:
    if pod.phase == "Pending" and _pending_too_long(run):
        _give_up_pending(run, pod, gateway)
        return
    stage, message = pending_stage(pod, run.pod_activity) if pod.phase == "Pending" else ("", "")
    run_observations.run_pod_observed(
        run=run,
        phase=pod.phase,
        node=pod.node,
        message=message,
        devices=devices,
        started_at=pod.started_at,
        stage=stage,
    )
    if pod.phase not in ("Running", "Succeeded", "Failed"):
        return
    problem = _fetch_logs(run, pod, gateway, streamed)
    if problem is None:  # not yet time to ask again: the last reading's words stand
        problem = run.log_error
    else:
        run_observations.run_log_read(run=run, problem=problem)
    if pod.phase in ("Succeeded", "Failed"):
        run_observations.run_finished(
            run=run,
            phase=pod.phase,
            message=_failure_message(pod),
            log_problem=problem,
            log_retry_until=timezone.now() + LOG_RETRY,
            started_at=pod.started_at,
            finished_at=pod.finished_at,
        )


def pending_stage(pod: PodState, said: dict[str, str] | None) -> tuple[str, str]:
    """Where a pending Pod is and what to say of it: the scheduler's words until it is bound
    ("" while it said nothing: the current message stands), then the kubelet's: an image it
    cannot pull, else its latest Event (`said`: Pulling image "...", Pulled, Created,
    Started)."""
    if not pod.node:
        return STAGE.SCHEDULING, pod.message or pod.reason
    node = {"node": pod.node}
    problem = _image_problem(pod)
    if problem:
        return STAGE.IMAGE_PULL_FAILED, state_messages.POD_IMAGE_NOT_PULLED % {
            **node,
            "problem": problem,
        }
    said = said or {}
    event = said.get("message", "")
    if said.get("reason") == "Pulling":
        return STAGE.PULLING, state_messages.POD_PULLING % {**node, "event": event}
    if said.get("reason") in KUBELET_PROGRESS:
        return STAGE.STARTING, state_messages.POD_STARTING % {**node, "event": event}
    return STAGE.BOUND, state_messages.POD_BOUND % node


def _pending_too_long(run: VerificationRun) -> bool:
    limit = timedelta(seconds=settings.RUN_PENDING_TIMEOUT_SECONDS)
    return run.created < timezone.now() - limit


def _give_up_pending(run: VerificationRun, pod: PodState, gateway: ClusterGateway) -> None:
    """A Pod that never starts (image never pulled, never scheduled) holds a claim and is
    followed for ever: delete it, and fail the run with the cluster's reason."""
    limit = settings.RUN_PENDING_TIMEOUT_SECONDS
    reason = _pending_reason(pod) or state_messages.NO_REASON_FROM_CLUSTER
    message = state_messages.POD_DID_NOT_START % {"seconds": limit, "reason": reason}
    if run_observations.run_failed(run=run, message=message):
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


def _image_problem(pod: PodState) -> str:
    """A container's failing pull, worded the same through ErrImagePull and the back-off
    between tries (whose message repeats the pull's error), so the run's message (and its
    audit trail) does not flip with each retry."""
    for container in pod.containers:
        if container.state == "waiting" and container.reason in PULL_REASONS:
            error = container.message.rpartition("ErrImagePull: ")[2]
            return f"{container.name}: ErrImagePull" + (f" ({error})" if error else "")
    return ""


def _fetch_logs(
    run: VerificationRun, pod: PodState, gateway: ClusterGateway, streamed: Streamed = frozenset()
) -> str | None:
    """Read what came after the last line kept, for containers that have started and whose
    log no stream is reading; each container is tried, whatever the others gave.

    Returns "" when every read worked, else the cluster's words for those that failed; None
    without asking while the last failure's back-off runs (run_observations.log_backoff).
    """
    if run.next_log_read_at and run.next_log_read_at > timezone.now():
        return None
    started = {c.name for c in pod.containers if c.state in ("running", "terminated")}
    kept = {log.container: log.last_timestamp for log in RunLog.objects.filter(run=run)}
    problems = []
    for container in VerificationRun.CONTAINERS:
        if container not in started or (run.pk, container) in streamed:
            continue
        try:
            lines = gateway.read_log(
                pod.namespace,
                pod.name,
                container,
                since=kept.get(container),
                limit_bytes=settings.RUN_LOG_MAX_BYTES,
            )
        except KubeError as error:
            log.warning("log of %s/%s %s: %s", pod.namespace, pod.name, container, error)
            problems.append(f"{container}: {error.message}")
            continue
        pairs = [(line.timestamp, line.text) for line in lines]
        run_observations.run_logs_appended(run=run, container=container, lines=pairs)
    return "; ".join(problems)


def _failure_message(pod: PodState) -> str:
    failed = [c for c in pod.containers if c.exit_code not in (None, 0)]
    if failed:
        parts = [f"{c.name} exited with {c.exit_code} ({c.reason or 'Error'})" for c in failed]
        return "; ".join(parts) + "."
    return pod.message or pod.reason
