"""Follow workloads from the cluster loop's caches: their Pods (where each is, the GPU it got,
its Events, its `main` container's log and exit code) and their Jobs (the end).

A batch job ends as its Job's terminal condition says (Complete, or Failed with the Job
controller's reason: BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy), never from
one failed Pod, which the Job may retry; its log is its newest Pod's. A notebook ends with
its Pod. Events and logs are extra, as a run's: a cluster that refuses them costs only
the explanation, and one broken workload stops no other.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from claims.domain import state_messages
from claims.domain import workload_observations as observed
from claims.kube import labels as label_keys
from claims.kube.gateway import ClusterGateway, JobState, KubeError, PodState
from claims.models import Cluster, Workload, WorkloadKind, WorkloadLog
from claims.worker.log_streams import WORKLOAD_STREAM
from claims.worker.run_pods import KUBELET_PROGRESS, Allocations, devices_of, pending_stage

log = logging.getLogger(__name__)

WS = Workload.State
STAGE = Workload.PodStage
FOLLOWED = (WS.STARTED, WS.RUNNING)
# How often the Events of a workload's Pod are read again, and how many are kept.
EVENTS_EVERY = timedelta(seconds=10)
EVENTS_KEPT = 10
EARLIEST = datetime.min.replace(tzinfo=timezone.get_current_timezone())


def followed_workloads(cluster: Cluster) -> list[Workload]:
    rows = Workload.objects.filter(state__in=FOLLOWED, claim__namespace_request__cluster=cluster)
    return list(rows.select_related("claim__namespace_request"))


def _by_workload(pods: list[PodState]) -> dict[str, list[PodState]]:
    by_workload: dict[str, list[PodState]] = {}
    for pod in pods:
        if key := pod.labels.get(label_keys.WORKLOAD):
            by_workload.setdefault(key, []).append(pod)
    return by_workload


def current_pods(
    workloads: list[Workload], pods: list[PodState]
) -> list[tuple[Workload, PodState]]:
    """Each workload with the Pod it follows now (for the log streams)."""
    by_workload = _by_workload(pods)
    pairs = [(w, current_pod(w, by_workload.get(str(w.pk), []))) for w in workloads]
    return [(workload, pod) for workload, pod in pairs if pod is not None]


def follow_workloads(
    workloads: list[Workload],
    pods: list[PodState],
    jobs: list[JobState] | None = None,
    gateway: ClusterGateway | None = None,
    allocations: Allocations | None = None,
    streamed: frozenset[tuple[int, str]] = frozenset(),
) -> list[str]:
    """Follow each workload on its own; returns what went wrong, one line per broken one.
    jobs None: the Jobs are not known this time (not listed yet, or refused); streamed: the
    workloads whose log a follow stream reads (log_streams.py), not read here as well."""
    by_workload = _by_workload(pods)
    by_name = {(job.namespace, job.name): job for job in jobs} if jobs is not None else None
    problems = []
    for workload in workloads:
        job = by_name.get((workload.claim.namespace, workload.name)) if by_name else None
        try:
            _follow(
                workload,
                by_workload.get(str(workload.pk), []),
                job,
                jobs_known=by_name is not None,
                gateway=gateway,
                allocations=allocations or {},
                streamed=(workload.pk, WORKLOAD_STREAM) in streamed,
            )
        except Exception as error:  # one broken workload must not stop the others
            log.exception("following workload %s", workload.pk)
            problems.append(f"workload {workload}: {getattr(error, 'message', None) or error}")
    return problems


def _follow(
    workload: Workload,
    pods: list[PodState],
    job: JobState | None,
    *,
    jobs_known: bool,
    gateway: ClusterGateway | None,
    allocations: Allocations,
    streamed: bool,
) -> None:
    pod = current_pod(workload, pods)
    if pod is not None:
        _observe_pod(workload, pod, gateway, allocations)
        if gateway is not None and _main_started(pod) and not streamed:
            _read_log(workload, pod, gateway)
    if job is not None and job.uid and workload.kube_uid and job.uid != workload.kube_uid:
        job = None  # an earlier Job of the name: not this workload's
    _end(workload, pod, job, jobs_known=jobs_known)


def current_pod(workload: Workload, pods: list[PodState]) -> PodState | None:
    """A notebook's Pod, or the newest Pod of a Job (a retry makes another)."""
    if workload.kind == WorkloadKind.NOTEBOOK:
        return next((pod for pod in pods if pod.name == workload.name), None)
    newest = sorted(pods, key=lambda pod: (pod.created_at or EARLIEST, pod.name))
    return newest[-1] if newest else None


def _observe_pod(
    workload: Workload, pod: PodState, gateway: ClusterGateway | None, allocations: Allocations
) -> None:
    if gateway is not None:
        _read_events(workload, pod, gateway)
    stage, message = "", ""
    if pod.phase == "Pending":
        events = workload.pod_events
        said: dict[str, str] = next((e for e in events if e.get("reason") in KUBELET_PROGRESS), {})
        stage, message = pending_stage(pod, said)
    elif pod.phase == "Running":
        stage = STAGE.RUNNING
    now, before = allocations.get(workload.claim_id, (None, None))
    observed.workload_pod_seen(
        workload=workload,
        pod_name=pod.name,
        stage=stage,
        message=message,
        node=pod.node or "",
        devices=devices_of(pod.name, pod, now, before),
    )
    if pod.phase == "Running" and workload.state == WS.STARTED:
        observed.workload_running(workload=workload, node=pod.node or "", started_at=pod.started_at)


def _read_events(workload: Workload, pod: PodState, gateway: ClusterGateway) -> None:
    """Every Event of its Pod, newest first: one list call per EVENTS_EVERY, and at once for
    a new Pod, one just bound or one that just ended."""
    fresh = pod.name != workload.pod_name or (pod.node or "") != workload.node
    fresh = fresh or (pod.phase == "Running" and workload.pod_stage != STAGE.RUNNING)
    read_at = workload.pod_events_read_at
    # Its stage goes "" once it is seen ended: the Events are read that once more.
    ended = pod.phase in ("Succeeded", "Failed") and workload.pod_stage != ""
    if not (fresh or ended or read_at is None or read_at < timezone.now() - EVENTS_EVERY):
        return
    try:
        found = gateway.list_pod_events(pod.namespace, pod.name, pod.uid)
    except KubeError as error:
        log.warning("events of %s/%s: %s", pod.namespace, pod.name, error)
        return
    kept = [event.as_warning() | {"type": event.type} for event in found[:EVENTS_KEPT]]
    observed.workload_pod_events_seen(workload=workload, events=kept)


def _main(pod: PodState) -> tuple[str, int | None, datetime | None, datetime | None]:
    """The `main` container's state, exit code, start and end."""
    for container in pod.containers:
        if container.name == Workload.CONTAINER:
            return container.state, container.exit_code, container.started_at, container.finished_at
    return "", None, None, None


def _main_started(pod: PodState) -> bool:
    return _main(pod)[0] in ("running", "terminated")


def _read_log(workload: Workload, pod: PodState, gateway: ClusterGateway) -> None:
    """What its `main` container printed since the last line kept."""
    kept = WorkloadLog.objects.filter(workload=workload, pod_name=pod.name).first()
    try:
        lines = gateway.read_log(
            pod.namespace,
            pod.name,
            Workload.CONTAINER,
            since=kept.last_timestamp if kept else None,
            limit_bytes=settings.RUN_LOG_MAX_BYTES,
        )
    except KubeError as error:
        log.warning("log of %s/%s: %s", pod.namespace, pod.name, error)
        observed.workload_log_read(workload=workload, problem=error.message)
        return
    pairs = [(line.timestamp, line.text) for line in lines]
    observed.workload_logs_appended(workload=workload, pod_name=pod.name, lines=pairs)
    observed.workload_log_read(workload=workload, problem="")


def _end(
    workload: Workload, pod: PodState | None, job: JobState | None, *, jobs_known: bool
) -> None:
    if workload.kind == WorkloadKind.JOB and jobs_known:
        if job is None or not job.finished:
            return
        if pod is not None and _catching_up(pod):
            return  # the Pod's end is still to be seen (its exit code): the next pass
        message = ""
        if job.finished == "Failed":
            words = {"reason": job.reason or "Failed", "message": job.message}
            message = state_messages.WORKLOAD_JOB_FAILED % words
        _finish(workload, pod, succeeded=job.finished == "Complete", message=message)
        return
    if pod is None or pod.phase not in ("Succeeded", "Failed"):
        return
    # A notebook ends with its Pod; a Job whose Jobs are not known this time succeeds with
    # its Pod (one completion), but fails only as its Job says.
    if pod.phase == "Succeeded":
        _finish(workload, pod, succeeded=True)
    elif workload.kind == WorkloadKind.NOTEBOOK:
        reason = pod.message or pod.reason or "Failed"
        message = state_messages.WORKLOAD_POD_FAILED % {"reason": reason}
        _finish(workload, pod, succeeded=False, message=message)


def _catching_up(pod: PodState) -> bool:
    """A Job ends after its Pods (pkg/controller/job), but the Pods seen may be older than the
    Job seen (two lists, or two watches): a Pod still running, and not being deleted (a Job
    past its deadline deletes its Pods), will be seen ended."""
    return pod.phase not in ("Succeeded", "Failed") and pod.deletion_timestamp is None


def _finish(
    workload: Workload, pod: PodState | None, *, succeeded: bool, message: str = ""
) -> None:
    _, exit_code, started_at, finished_at = _main(pod) if pod else ("", None, None, None)
    observed.workload_ended(
        workload=workload,
        succeeded=succeeded,
        message=message,
        exit_code=exit_code,
        started_at=started_at,
        finished_at=finished_at,
    )
