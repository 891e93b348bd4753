"""State changes the cluster reports, called by the Celery tasks and the sync.

Like claims.services, each change goes through claims.transitions (conditional UPDATE plus
an AuditEvent); the actor is the system (None). Every function is safe to call twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from claims import changes, logparse, state_messages
from claims.models import ClaimRequest, NamespaceRequest, RunLog, VerificationRun
from claims.transitions import enqueue, fail_queued_runs, record_event, transition, update_fields

NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State
LIVE_CLAIMS = (CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE)


def waiting_for_cluster(row: Any, *, message: str) -> None:
    """The cluster did not answer within a task's retries: not a failure. The row keeps its
    state, says why it waits, and the reconciler tries again after a capped back-off."""
    rounds = row.cluster_waits + 1
    delay = min(
        settings.CLUSTER_WAIT_FIRST_SECONDS * 2 ** (rounds - 1),
        settings.CLUSTER_WAIT_MAX_SECONDS,
    )
    text = state_messages.WAITING_FOR_CLUSTER % {"seconds": delay, "reason": message}
    at = timezone.now() + timedelta(seconds=delay)
    changed = (
        type(row)
        .objects.filter(pk=row.pk, state=row.state)
        .update(state_message=text, next_attempt_at=at, cluster_waits=rounds)
    )
    if changed:
        row.state_message, row.next_attempt_at, row.cluster_waits = text, at, rounds
        record_event(row, text)


def namespace_applied(*, namespace_request: NamespaceRequest, uid: str = "") -> bool:
    return transition(
        namespace_request,
        to=NS.ACTIVE,
        allowed=(NS.APPROVED,),
        message=gettext_noop("Namespace created."),
        kube_uid=uid,
    )


def namespace_failed(*, namespace_request: NamespaceRequest, message: str) -> bool:
    """The namespace cannot be (or no longer is) the portal's: it and its claims fail."""
    ns = namespace_request
    with transaction.atomic():
        changed = transition(ns, to=NS.FAILED, allowed=(NS.APPROVED, NS.ACTIVE), message=message)
        if changed:
            live = ns.claim_requests.filter(state__in=LIVE_CLAIMS)
            for claim in live:
                claim_failed(
                    claim_request=claim,
                    message=state_messages.NAMESPACE_FAILED
                    % {"namespace": ns.name, "reason": message},
                )
    return changed


def namespace_drifted(*, namespace_request: NamespaceRequest, message: str) -> bool:
    """Our namespace was deleted outside the portal: create it again, with its access and
    the claims that lived in it (their GPUs went with it)."""
    ns = namespace_request
    with transaction.atomic():
        changed = transition(
            ns,
            to=NS.APPROVED,
            allowed=(NS.ACTIVE,),
            message=state_messages.CREATING_AGAIN % {"reason": message},
            access_granted_at=None,
        )
        if changed:
            enqueue("claims.tasks.apply_namespace", ns.pk)
            for claim in ns.claim_requests.filter(state__in=LIVE_CLAIMS):
                claim_drifted(
                    claim_request=claim,
                    message=state_messages.NAMESPACE_RECREATED % {"namespace": ns.name},
                )
    return changed


def namespace_access_granted(*, namespace_request: NamespaceRequest) -> None:
    update_fields(namespace_request, access_granted_at=timezone.now())


def namespace_access_lost(*, namespace_request: NamespaceRequest, message: str) -> None:
    """Access objects of ours were removed outside the portal: grant access again."""
    update_fields(namespace_request, access_granted_at=None)
    record_event(namespace_request, state_messages.GRANTING_AGAIN % {"reason": message})
    enqueue("claims.tasks.grant_namespace_access", namespace_request.pk)


def labels_restored(*, obj: NamespaceRequest | ClaimRequest, message: str) -> None:
    """The labels of an object of ours were changed outside the portal and put back."""
    record_event(obj, message)


def namespace_uid_seen(*, namespace_request: NamespaceRequest, uid: str) -> None:
    update_fields(namespace_request, kube_uid=uid)


def namespace_deleted(*, namespace_request: NamespaceRequest) -> bool:
    return transition(
        namespace_request,
        to=NS.DELETED,
        allowed=(NS.DELETING,),
        message=gettext_noop("Namespace deleted."),
    )


def claim_applying(*, claim_request: ClaimRequest) -> bool:
    """Approved → applying: this worker owns the apply now."""
    return transition(
        claim_request,
        to=CS.APPLYING,
        allowed=(CS.APPROVED,),
        message=gettext_noop("Applying to the cluster."),
    )


def claim_applied(
    *, claim_request: ClaimRequest, api_version: str, manifest: dict[str, Any], uid: str = ""
) -> bool:
    message = state_messages.CLAIM_CREATED % {"version": api_version}
    return transition(
        claim_request,
        to=CS.WAITING,
        allowed=(CS.APPLYING,),
        message=message,
        applied_api_version=api_version,
        applied_manifest=manifest,
        applied_at=timezone.now(),
        kube_uid=uid,
    )


def claim_drifted(*, claim_request: ClaimRequest, message: str) -> bool:
    """The ResourceClaim we made is gone from the cluster: apply it again."""
    changed = transition(
        claim_request,
        to=CS.APPROVED,
        allowed=LIVE_CLAIMS,
        message=state_messages.REAPPLYING % {"reason": message},
        allocation=None,
        node="",
    )
    if changed:
        enqueue("claims.tasks.apply_claim", claim_request.pk)
    return changed


def claim_failed(*, claim_request: ClaimRequest, message: str) -> bool:
    allowed = (CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE)
    with transaction.atomic():
        failed = transition(claim_request, to=CS.FAILED, allowed=allowed, message=message)
        if failed:
            fail_queued_runs(
                claim_request, message=state_messages.CLAIM_FAILED % {"reason": message}
            )
    return failed


def claim_allocation_seen(
    *, claim_request: ClaimRequest, allocation: dict[str, Any] | None
) -> bool:
    """Record the claim's current allocation: in use while allocated, waiting when not."""
    claim = claim_request
    node = (allocation or {}).get("node") or ""
    if allocation and claim.state == CS.WAITING:
        devices = ", ".join(d["device"] for d in allocation.get("devices", []))
        return transition(
            claim,
            to=CS.IN_USE,
            allowed=(CS.WAITING,),
            allocation=allocation,
            node=node,
            message=state_messages.ALLOCATED % {"devices": devices, "node": node},
        )
    if not allocation and claim.state == CS.IN_USE:
        message = state_messages.NO_POD_USES_IT
        return transition(
            claim, to=CS.WAITING, allowed=(CS.IN_USE,), allocation=None, node="", message=message
        )
    if claim.state in (CS.WAITING, CS.IN_USE) and claim.allocation != allocation:
        update_fields(claim, allocation=allocation, node=node)
    return False


def claim_cleaned_up(*, claim_request: ClaimRequest) -> None:
    update_fields(claim_request, cleaned_up_at=timezone.now(), allocation=None, node="")


def run_pod_warnings_seen(*, run: VerificationRun, warnings: list[dict[str, Any]]) -> None:
    """The latest Warning Events of the run's pending Pod; only a change wakes its page."""
    if warnings == run.pod_warnings:
        VerificationRun.objects.filter(pk=run.pk).update(pod_warnings_read_at=timezone.now())
        return
    update_fields(run, pod_warnings=warnings, pod_warnings_read_at=timezone.now())


def run_creating(*, run: VerificationRun) -> bool:
    return transition(
        run, to=RS.CREATING, allowed=(RS.QUEUED,), message=gettext_noop("Creating the Pod.")
    )


def run_pod_created(*, run: VerificationRun, uid: str = "") -> bool:
    return transition(
        run,
        to=RS.PENDING,
        allowed=(RS.CREATING,),
        message=gettext_noop("Pod created; waiting to schedule."),
        pod_uid=uid,
    )


def run_failed(*, run: VerificationRun, message: str) -> bool:
    allowed = (RS.QUEUED, RS.CREATING, RS.PENDING, RS.RUNNING)
    return transition(
        run, to=RS.FAILED, allowed=allowed, message=message, finished_at=timezone.now()
    )


def run_pod_observed(
    *,
    run: VerificationRun,
    phase: str,
    node: str | None = None,
    message: str = "",
    devices: list[dict[str, Any]] | None = None,
    started_at: datetime | None = None,
) -> bool:
    """Follow the Pod: Pending (with the scheduler's words) → Running; devices when seen."""
    if devices and not run.devices:
        update_fields(run, devices=devices, node=node or run.node)
    elif node and node != run.node:
        update_fields(run, node=node)
    if phase == "Pending" and message and message != run.state_message:
        return transition(run, to=RS.PENDING, allowed=(RS.PENDING, RS.CREATING), message=message)
    if phase == "Running":
        return transition(
            run,
            to=RS.RUNNING,
            allowed=(RS.CREATING, RS.PENDING),
            message=state_messages.RUNNING_ON % {"node": node},
            started_at=started_at or timezone.now(),
        )
    return False


def run_logs_appended(
    *, run: VerificationRun, container: str, lines: list[tuple[datetime, str]]
) -> None:
    """Keep the new log lines, bounded: only the tail of a very long log is kept.

    lines is a read from the last timestamp kept on (inclusive), so it may repeat lines.
    """
    log, _ = RunLog.objects.get_or_create(run=run, container=container)
    lines = _unseen(log, lines)
    if not lines:
        return
    last = lines[-1][0]
    at_last = sum(1 for ts, _ in lines if ts == last)
    if last == log.last_timestamp:
        at_last += log.lines_at_last_timestamp
    text = log.text + "".join(line if line.endswith("\n") else line + "\n" for _, line in lines)
    log.text, log.truncated = _tail(text, log.truncated)
    log.last_timestamp, log.lines_at_last_timestamp = last, at_last
    log.updated = timezone.now()
    log.save()
    changes.announce(run)


def _unseen(log: RunLog, lines: list[tuple[datetime, str]]) -> list[tuple[datetime, str]]:
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


def _tail(text: str, truncated: bool) -> tuple[str, bool]:
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
) -> bool:
    """The Pod ended: its phase is the run's; parse what each container printed for the verdict.

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
    return transition(
        run,
        to=RS.SUCCEEDED if phase == "Succeeded" else RS.FAILED,
        allowed=(RS.CREATING, RS.PENDING, RS.RUNNING),
        message=summary,
        finished_at=timezone.now(),
        log_error=log_problem,
        log_retry_until=log_retry_until if log_problem else None,
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


def run_log_read(*, run: VerificationRun, problem: str) -> None:
    """Note (or clear) why the logs of a run could not be read, in the cluster's words."""
    if problem != run.log_error:
        update_fields(run, log_error=problem)


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
    update_fields(run, log_error="", log_retry_until=None, state_message=message, **verdict)
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
