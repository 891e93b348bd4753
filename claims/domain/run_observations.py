"""State changes the cluster reports about verification runs: Pod phases, logs, verdict.

Called by the run follower and the sync, like claims.domain.observations (namespaces and
claims): each change goes through claims.domain.transitions (conditional UPDATE plus an
AuditEvent), the actor is the system (None), and every function is safe to call twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_noop

from claims.domain import state_messages
from claims.domain.transitions import change, record_event, update_fields
from claims.live import changes
from claims.models import RunLog, VerificationRun, WorkloadLog
from claims.policy import logparse

RS = VerificationRun.State
STAGE = VerificationRun.PodStage


def run_pod_events_seen(
    *, run: VerificationRun, warnings: list[dict[str, Any]], activity: dict[str, str]
) -> None:
    """The latest Warning Events of the run's pending Pod and the kubelet's latest word on
    its containers; only a change wakes its page."""
    now = timezone.now()
    if warnings == run.pod_warnings and activity == run.pod_activity:
        VerificationRun.objects.filter(pk=run.pk).update(pod_warnings_read_at=now)
        run.pod_warnings_read_at = now
        return
    update_fields(run, pod_warnings=warnings, pod_activity=activity, pod_warnings_read_at=now)


def run_waits_in_queue(*, run: VerificationRun) -> None:
    """The run stays queued: its claim waits its turn for devices (claims/worker/queue_turn.py)."""
    if run.state_message != state_messages.WAITS_ITS_TURN:
        update_fields(run, state_message=state_messages.WAITS_ITS_TURN)


def run_creating(*, run: VerificationRun) -> bool:
    return change(run, "create_pod", message=gettext_noop("Creating the Pod."))


def run_pod_created(*, run: VerificationRun, uid: str = "") -> bool:
    return change(
        run,
        "pod_created",
        message=gettext_noop("Pod created; waiting to schedule."),
        pod_uid=uid,
        pod_stage=STAGE.SCHEDULING,
    )


def run_failed(*, run: VerificationRun, message: str) -> bool:
    return change(run, "fail", message=message, finished_at=timezone.now(), pod_stage="")


def run_pod_observed(
    *,
    run: VerificationRun,
    phase: str,
    node: str | None = None,
    message: str = "",
    devices: list[dict[str, Any]] | None = None,
    started_at: datetime | None = None,
    stage: str = "",
) -> bool:
    """Follow the Pod: Pending (the scheduler's words, then the kubelet's: bound, pulling,
    starting, or an image it cannot pull) → Running; devices when seen."""
    if devices and not run.devices:
        update_fields(run, devices=devices, node=node or run.node)
    elif node and node != run.node:
        update_fields(run, node=node)
    if phase == "Pending" and stage and stage != run.pod_stage:
        update_fields(run, pod_stage=stage)
    if phase == "Pending" and message and message != run.state_message:
        return change(run, "pending", message=message)
    if phase == "Running":
        return change(
            run,
            "running",
            message=state_messages.RUNNING_ON % {"node": node},
            started_at=started_at or timezone.now(),
            pod_stage=STAGE.RUNNING,
        )
    return False


def run_logs_appended(
    *, run: VerificationRun, container: str, lines: list[tuple[datetime, str]]
) -> None:
    """Keep the new log lines, bounded: only the tail of a very long log is kept.

    lines is a read from the last timestamp kept on (inclusive), so it may repeat lines.
    """
    log, _ = RunLog.objects.get_or_create(run=run, container=container)
    lines = unseen_lines(log, lines)
    if not lines:
        return
    last = lines[-1][0]
    at_last = sum(1 for ts, _ in lines if ts == last)
    if last == log.last_timestamp:
        at_last += log.lines_at_last_timestamp
    text = log.text + "".join(line if line.endswith("\n") else line + "\n" for _, line in lines)
    log.text, log.truncated = kept_tail(text, log.truncated)
    log.last_timestamp, log.lines_at_last_timestamp = last, at_last
    log.updated = timezone.now()
    log.save()
    changes.announce(run)


def unseen_lines(
    log: RunLog | WorkloadLog, lines: list[tuple[datetime, str]]
) -> list[tuple[datetime, str]]:
    """Drop lines older than the last kept, and the ones kept that share its timestamp."""
    if not log.last_timestamp:
        return lines
    to_skip = log.lines_at_last_timestamp
    unseen = []
    for ts, text in lines:
        if ts < log.last_timestamp:
            continue
        if ts == log.last_timestamp and to_skip:
            to_skip -= 1
            continue
        unseen.append((ts, text))
    return unseen


def kept_tail(text: str, truncated: bool) -> tuple[str, bool]:
    """At most RUN_LOG_MAX_BYTES of text, cut at a line start; True once anything was cut."""
    encoded = text.encode()
    limit = settings.RUN_LOG_MAX_BYTES
    if len(encoded) <= limit:
        return text, truncated
    text = encoded[-limit:].decode(errors="ignore")
    return (text[text.find("\n") + 1 :] if "\n" in text else text), True


def run_finished(
    *,
    run: VerificationRun,
    phase: str,
    message: str = "",
    log_problem: str = "",
    log_retry_until: datetime | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
) -> bool:
    """The Pod ended: its phase is the run's; parse what each container printed for the verdict.

    started_at and finished_at are the containers' (a short Pod may end between two looks,
    never seen running); the run keeps a start it already has.

    Logs that could not be read leave the verdict unknown (a Failed Pod still fails) and are
    read again until log_retry_until.
    """
    verdict = _verdict(run, phase)
    said = message or state_messages.POD_ENDED % {"state": phase.lower()}
    summary = state_messages.CUDA_PASSED if verdict["passed"] else said
    if verdict["devices"] and not run.devices:
        summary = state_messages.DEVICES_FROM_DEVICE_QUERY % {"before": summary}
    if log_problem:
        verdict["passed"] = False if phase != "Succeeded" else None
        summary = state_messages.LOGS_UNREAD % {"before": said, "problem": log_problem}
    return change(
        run,
        "succeeded" if phase == "Succeeded" else "pod_failed",
        message=summary,
        started_at=run.started_at or started_at,
        finished_at=finished_at or timezone.now(),
        log_error=log_problem,
        log_retry_until=log_retry_until if log_problem else None,
        pod_stage="",
        **verdict,
    )


def _verdict(run: VerificationRun, phase: str) -> dict[str, Any]:
    """passed and what vectorAdd and deviceQuery printed, from the logs kept so far."""
    logs = {log.container: log.text for log in run.logs.all()}
    vector = logparse.parse_vector_add(logs.get("ctr0", ""))
    query = logparse.parse_device_query(logs.get("ctr1", ""))
    device = query.devices[0] if query.devices else None
    return {
        "passed": phase == "Succeeded" and vector.passed is True and query.passed is True,
        "devices": run.devices or devices_named_by(query),
        "vector_add_passed": vector.passed,
        "device_query_passed": query.passed,
        "device_name": device.name if device else "",
        "compute_capability": (device.compute_capability or "") if device else "",
        "memory_mib": device.memory_mib if device else None,
    }


# A failed log read is tried again after 1, 2, 4 ... seconds, at most a minute apart.
LOG_BACKOFF_FIRST_SECONDS = 1.0
LOG_BACKOFF_MAX_SECONDS = 60.0


def log_backoff(attempts: int) -> timedelta:
    seconds = LOG_BACKOFF_FIRST_SECONDS * 2 ** max(attempts - 1, 0)
    return timedelta(seconds=min(seconds, LOG_BACKOFF_MAX_SECONDS))


def run_log_read(*, run: VerificationRun, problem: str) -> None:
    """Note (or clear) why the logs of a run could not be read, in the cluster's words, and
    when to try again: later after each failure in a row, at once after a success."""
    if problem:
        attempts = run.log_attempts + 1
        next_at = timezone.now() + log_backoff(attempts)
        update_fields(run, log_error=problem, log_attempts=attempts, next_log_read_at=next_at)
    elif run.log_error or run.log_attempts or run.next_log_read_at:
        update_fields(run, log_error="", log_attempts=0, next_log_read_at=None)


def run_logs_recovered(*, run: VerificationRun) -> None:
    """The logs of a finished run were read after all: the verdict comes from them now."""
    phase = "Succeeded" if run.state == RS.SUCCEEDED else "Failed"
    verdict = _verdict(run, phase)
    if phase == "Failed":
        verdict["passed"] = False
    message = (
        state_messages.LOGS_READ_PASSED
        if verdict["passed"]
        else state_messages.LOGS_READ_NOT_PASSED
    )
    update_fields(
        run,
        log_error="",
        log_retry_until=None,
        log_attempts=0,
        next_log_read_at=None,
        state_message=message,
        **verdict,
    )
    record_event(run, message)


def run_logs_given_up(*, run: VerificationRun, reason: str) -> None:
    gave_up = state_messages.GAVE_UP_ON_LOGS % {"reason": reason}
    before = run.state_message
    message = (
        state_messages.GAVE_UP_ON_LOGS_TOO % {"before": before, "reason": reason}
        if before
        else gave_up
    )
    update_fields(run, log_retry_until=None, state_message=message)
    record_event(run, gave_up)


def devices_named_by(query: logparse.DeviceQueryResult) -> list[dict[str, Any]]:
    """The fallback record of a run's devices: names only, marked as coming from deviceQuery."""
    return [
        {
            "request": "",
            "driver": "",
            "pool": "",
            "device": "",
            "attributes": {"productName": device.name},
            "capacity": {},
            "source": "deviceQuery",
        }
        for device in query.devices
    ]
