"""The one way a state field changes: a conditional UPDATE plus an AuditEvent row."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone

from claims import audit, changes
from claims.models import AuditEvent, ClaimRequest, NamespaceRequest, VerificationRun
from portal.celery import app

Stateful = NamespaceRequest | ClaimRequest | VerificationRun

# Sent inside the transaction of every state change (obj, from_state, to_state, actor,
# message): what follows a change (notices, a claim's lifetime) listens here, in one place.
state_changed = Signal()

KINDS: dict[type[models.Model], str] = {
    NamespaceRequest: AuditEvent.Kind.NAMESPACE_REQUEST,
    ClaimRequest: AuditEvent.Kind.CLAIM_REQUEST,
    VerificationRun: AuditEvent.Kind.VERIFICATION_RUN,
}


def transition(
    obj: Stateful,
    *,
    to: str,
    allowed: tuple = (),
    actor: Any = None,
    message: str = "",
    initial: bool = False,
    **fields: Any,
) -> bool:
    """Move obj to state `to` if it is still in the state we loaded and that state is allowed.

    The UPDATE names the old state, so of two workers (or a double submit) only one wins;
    the loser gets False and obj refreshed from the database.
    """
    if initial:
        # obj was just created in state `to`: the row gets the first message too (unless it
        # was created with it).
        with transaction.atomic(savepoint=False):
            if obj.state_message != message:
                type(obj).objects.filter(pk=obj.pk).update(state_message=message)
                obj.state_message = message
            _record(obj, actor, "", to, message)
        return True
    if obj.state not in allowed:
        return False
    now = timezone.now()
    # A new state is new work: whatever retry was scheduled for the old one is moot.
    values = {
        "state": to,
        "state_message": message,
        "updated": now,
        "next_attempt_at": None,
        "cluster_waits": 0,
        **fields,
    }
    from_state = obj.state
    # One transaction: a worker killed between the UPDATE and the audit row's INSERT must not
    # leave a state change that the audit log never saw. (No savepoint inside a caller's
    # transaction: a failure here fails that transaction as a whole anyway.)
    with transaction.atomic(savepoint=False):
        changed = type(obj).objects.filter(pk=obj.pk, state=from_state).update(**values)
        if changed == 1:
            for field, value in values.items():
                setattr(obj, field, value)
            _record(obj, actor, from_state, to, message, fields=values)
    if changed != 1:
        obj.refresh_from_db()
        return False
    return True


def fail_queued_runs(claim: ClaimRequest, *, message: str, actor: Any = None) -> None:
    """Runs queued on a claim that will not be applied now (rejected, failed) end failed."""
    queued = VerificationRun.State.QUEUED
    for run in claim.runs.filter(state=queued):
        transition(
            run,
            to=VerificationRun.State.FAILED,
            allowed=(queued,),
            actor=actor,
            message=message,
            finished_at=timezone.now(),
        )


def update_fields(obj: Stateful, **fields: Any) -> None:
    """Change fields other than the state (allocation, node, ...) without an event row."""
    fields["updated"] = timezone.now()
    type(obj).objects.filter(pk=obj.pk).update(**fields)
    for field, value in fields.items():
        setattr(obj, field, value)
    changes.announce(obj)


def record_event(obj: Stateful, message: str, actor: Any = None, *, action: str = "") -> None:
    """An audit row for something that happened to obj without changing its state."""
    _record(obj, actor, obj.state, obj.state, message, action=action)


def _record(
    obj: Stateful, actor: Any, from_state: str, to_state: str, message: str, **kwargs: Any
) -> None:
    audit.record_change(
        obj, actor=actor, from_state=from_state, to_state=to_state, message=message, **kwargs
    )
    changes.announce(obj, state=to_state)
    if from_state != to_state:
        change = {"from_state": from_state, "to_state": to_state, "message": message}
        state_changed.send(type(obj), obj=obj, actor=actor, **change)


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    """Send a task once the surrounding transaction commits (by name: no import of tasks)."""
    transaction.on_commit(
        lambda: app.send_task(
            task_name, args=args, countdown=countdown, queue=settings.CELERY_TASK_DEFAULT_QUEUE
        ),
        robust=True,
    )
