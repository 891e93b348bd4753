"""What the portal reads of Pods, Jobs and container logs, as plain records built from the
cluster's JSON."""

from dataclasses import dataclass, field
from datetime import datetime

from claims.kube.parsing import Obj, parse_time, portal_labels


@dataclass(frozen=True)
class ContainerState:
    name: str
    state: str  # "waiting", "running", "terminated" or "unknown"
    reason: str
    exit_code: int | None
    message: str
    started_at: datetime | None = None  # state.running or state.terminated startedAt
    finished_at: datetime | None = None  # state.terminated.finishedAt


@dataclass(frozen=True)
class PodState:
    namespace: str
    name: str
    phase: str
    node: str | None
    reason: str
    message: str
    started_at: datetime | None  # the first container's start (else the Pod's startTime)
    finished_at: datetime | None  # the last container's end, once all have ended
    containers: list[ContainerState] = field(default_factory=list)
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)  # the portal's own (portal_labels)
    # Set once the Pod was deleted; a bound Pod stays until its node's kubelet confirms.
    deletion_timestamp: datetime | None = None
    created_at: datetime | None = None  # metadata.creationTimestamp: a Job's newest Pod


@dataclass(frozen=True)
class JobState:
    """What the portal follows of a batch/v1 Job: its end, as the Job controller decided it
    (a terminal condition Complete or Failed, with its reason and message), not a Pod's."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    finished: str  # "Complete", "Failed" or "" while it runs
    reason: str  # the terminal condition's: BackoffLimitExceeded, DeadlineExceeded, ...
    message: str


@dataclass(frozen=True)
class LogLine:
    timestamp: datetime
    text: str


def _container_state(status: Obj) -> ContainerState:
    state = status.get("state") or {}
    for kind in ("terminated", "running", "waiting"):
        if kind in state:
            detail = state[kind] or {}
            return ContainerState(
                name=status["name"],
                state=kind,
                reason=detail.get("reason", ""),
                exit_code=detail.get("exitCode"),
                message=detail.get("message", ""),
                started_at=parse_time(detail.get("startedAt")),
                finished_at=parse_time(detail.get("finishedAt")),
            )
    return ContainerState(status["name"], "unknown", "", None, "")


def _pod_reason(status: Obj) -> tuple[str, str]:
    """The Pod's own reason, else why the scheduler could not place it."""
    if status.get("reason") or status.get("message"):
        return status.get("reason", ""), status.get("message", "")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("reason", ""), condition.get("message", "")
    return "", ""


def _started_at(containers: list[ContainerState]) -> datetime | None:
    starts = [c.started_at for c in containers if c.started_at]
    return min(starts) if starts else None


def _finished_at(containers: list[ContainerState]) -> datetime | None:
    ends = [c.finished_at for c in containers]
    if not ends or None in ends:
        return None
    return max(end for end in ends if end)


def pod_state(obj: Obj) -> PodState:
    status = obj.get("status") or {}
    containers = [_container_state(c) for c in status.get("containerStatuses") or []]
    reason, message = _pod_reason(status)
    return PodState(
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        phase=status.get("phase", "Pending"),
        node=(obj.get("spec") or {}).get("nodeName"),
        reason=reason,
        message=message,
        started_at=_started_at(containers) or parse_time(status.get("startTime")),
        finished_at=_finished_at(containers),
        containers=containers,
        uid=obj["metadata"].get("uid", ""),
        labels=portal_labels(obj),
        deletion_timestamp=parse_time(obj["metadata"].get("deletionTimestamp")),
        created_at=parse_time(obj["metadata"].get("creationTimestamp")),
    )


def job_state(obj: Obj) -> JobState:
    """The Job's metadata and its terminal condition (Complete or Failed, status True): the
    controller adds SuccessCriteriaMet or FailureTarget first and the terminal one once its
    Pods are gone (pkg/controller/job), so only the terminal one says it ended."""
    metadata = obj.get("metadata") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    terminal: Obj = next(
        (
            c
            for c in conditions
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ),
        {},
    )
    return JobState(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        labels=portal_labels(obj),
        finished=terminal.get("type", ""),
        reason=terminal.get("reason", ""),
        message=terminal.get("message", ""),
    )


def log_lines(body: bytes, since: datetime | None) -> list[LogLine]:
    """Lines of a `timestamps=true` log, those before `since` dropped.

    Lines at `since` are kept: another line may share the timestamp of the last one read.
    """
    lines = []
    for raw in body.decode("utf-8", errors="replace").splitlines():
        stamp, _, text = raw.partition(" ")
        timestamp = parse_time(stamp)
        if timestamp is None or (since is not None and timestamp < since):
            continue
        lines.append(LogLine(timestamp=timestamp, text=text.rstrip("\r")))
    return lines
