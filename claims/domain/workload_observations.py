"""State changes the cluster reports about workloads: applied, running, ended, cleaned up.

Called by the worker (claims.worker.workload_steps) like claims.domain.run_observations:
each change goes through claims.domain.transitions, the actor is the system, and every
function is safe to call twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_noop

from claims.clusters import credentials
from claims.domain import run_observations, state_messages
from claims.domain.transitions import change, update_fields
from claims.live import changes
from claims.models import KueueState, Workload, WorkloadKind, WorkloadLog

WS = Workload.State


def workload_applying(*, workload: Workload) -> bool:
    return change(workload, "apply", message=gettext_noop("Applying its manifests."))


def workload_applied(*, workload: Workload, uid: str) -> bool:
    return change(
        workload,
        "applied",
        message=gettext_noop("Created in the cluster; waiting for its Pod to start."),
        kube_uid=uid,
    )


def workload_failed(*, workload: Workload, message: str) -> bool:
    return change(workload, "fail", message=message, finished_at=timezone.now())


def workload_running(*, workload: Workload, node: str, started_at: datetime | None) -> bool:
    return change(
        workload,
        "running",
        message=state_messages.RUNNING_ON % {"node": node},
        node=node,
        started_at=started_at or timezone.now(),
    )


def workload_succeeded(*, workload: Workload, finished_at: datetime | None) -> bool:
    return change(
        workload,
        "succeeded",
        message=gettext_noop("Finished successfully."),
        finished_at=finished_at or timezone.now(),
    )


def workload_cleaned_up(*, workload: Workload) -> None:
    update_fields(workload, cleaned_up_at=timezone.now())


# --- The queue (claims/worker/queue_steps.py) ---


def workload_suspended(*, workload: Workload) -> None:
    """Its Job is (about to be) created suspended, its notebook not created yet: its claim
    waits its turn for devices."""
    if workload.suspended:
        return
    if workload.kind == WorkloadKind.JOB:
        update_fields(workload, suspended=True)
        return
    update_fields(workload, suspended=True, state_message=state_messages.WAITS_ITS_TURN)


def workload_turn_came(*, workload: Workload) -> None:
    """A workload that waited before anything of it was created goes to the cluster now."""
    update_fields(
        workload,
        suspended=False,
        state_message=gettext_noop("Its turn in the queue came: creating it."),
    )


def workload_queued_in_kueue(*, workload: Workload, queue: str) -> None:
    """Its Job is (about to be) created suspended in Kueue's LocalQueue `queue`: pending in
    Kueue. A notebook's Pod is only labelled with it: Kueue's word is shown once Kueue (its
    pod integration, where on) made a Workload for it."""
    pending = KueueState.PENDING if workload.kind == WorkloadKind.JOB else ""
    update_fields(workload, kueue_queue=queue, kueue_state=pending)


def workload_kueue_seen(
    *, workload: Workload, state: str, message: str, position: int | None
) -> None:
    """What Kueue's Workload for its Job says now (claims/worker/kueue_steps.py)."""
    seen = {"kueue_state": state, "kueue_message": message, "kueue_position": position}
    changed = {key: value for key, value in seen.items() if getattr(workload, key) != value}
    if changed:
        update_fields(workload, **changed)


def workload_resumed(*, workload: Workload) -> None:
    update_fields(
        workload,
        suspended=False,
        state_message=gettext_noop("Its turn in the queue came: its Job was resumed."),
    )


def workload_pod_seen(
    *,
    workload: Workload,
    pod_name: str,
    stage: str,
    message: str,
    node: str,
    devices: list[dict[str, Any]] | None,
) -> None:
    """Where its Pod is (a Job's newest): the stage, the scheduler's or kubelet's words while
    it waits, its node and the GPU it got; only a change is written (and wakes its page)."""
    fields: dict[str, Any] = {
        "pod_name": pod_name,
        "pod_stage": stage,
        "node": node or workload.node,
        "devices": devices or workload.devices,
    }
    if message and workload.state == WS.STARTED:
        fields["state_message"] = message
    changed = {key: value for key, value in fields.items() if getattr(workload, key) != value}
    if changed:
        update_fields(workload, **changed)


def workload_pod_events_seen(*, workload: Workload, events: list[dict[str, Any]]) -> None:
    now = timezone.now()
    if events == workload.pod_events:
        Workload.objects.filter(pk=workload.pk).update(pod_events_read_at=now)
        workload.pod_events_read_at = now
        return
    update_fields(workload, pod_events=events, pod_events_read_at=now)


def workload_ended(
    *,
    workload: Workload,
    succeeded: bool,
    message: str,
    exit_code: int | None,
    started_at: datetime | None,
    finished_at: datetime | None,
) -> bool:
    """Its Job completed or failed (as the Job controller decided), or a notebook's Pod ended:
    with the exit code of its `main` container and when it ran."""
    return change(
        workload,
        "succeeded" if succeeded else "fail",
        message=message or gettext_noop("Finished successfully."),
        exit_code=exit_code,
        started_at=workload.started_at or started_at,
        finished_at=finished_at or timezone.now(),
        pod_stage="",
    )


def workload_logs_appended(
    *, workload: Workload, pod_name: str, lines: list[tuple[datetime, str]]
) -> None:
    """Keep the new lines of its Pod's log, bounded as a run's; a Job's next Pod (a retry)
    goes on below a `==> pod <==` header, as tail(1) heads each file."""
    log, _ = WorkloadLog.objects.get_or_create(workload=workload)
    lines = _without_token(workload, lines)
    text = log.text
    if log.pod_name != pod_name:
        if log.pod_name:
            text += f"==> {pod_name} <==\n"
        log.pod_name, log.last_timestamp, log.lines_at_last_timestamp = pod_name, None, 0
    lines = run_observations.unseen_lines(log, lines)
    if not lines and text == log.text:
        return
    if lines:
        last = lines[-1][0]
        at_last = sum(1 for ts, _ in lines if ts == last)
        if last == log.last_timestamp:
            at_last += log.lines_at_last_timestamp
        log.last_timestamp, log.lines_at_last_timestamp = last, at_last
    text += "".join(line if line.endswith("\n") else line + "\n" for _, line in lines)
    log.text, log.truncated = run_observations.kept_tail(text, log.truncated)
    log.updated = timezone.now()
    log.save()
    changes.announce(workload)


# What a notebook's token is replaced with in its log: Jupyter prints its URL with the token,
# and the log is shown to approvers too, the token to its owner only.
TOKEN_HIDDEN = "<token: on the notebook's page>"


def _without_token(
    workload: Workload, lines: list[tuple[datetime, str]]
) -> list[tuple[datetime, str]]:
    if not workload.access_token_encrypted:
        return lines
    token = credentials.decrypt(workload.access_token_encrypted)
    return [(at, text.replace(token, TOKEN_HIDDEN)) for at, text in lines]


def workload_log_read(*, workload: Workload, problem: str) -> None:
    """Note (or clear) why its log could not be read, in the cluster's words."""
    if problem != workload.log_error:
        update_fields(workload, log_error=problem)
