"""The one way a state field changes: a conditional UPDATE plus an AuditEvent row.

CHANGES is the one table of what may follow what: every change a request row makes has a name
there, with the states it may be made from and the state it leads to. Code names the change
(`change(claim, "approve", ...)`); it never lists allowed states itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery import current_app as app
from django.conf import settings
from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone

from claims.domain import audit
from claims.live import changes
from claims.models import ClaimExtension, ClaimRequest, NamespaceRequest, VerificationRun, Workload

log = logging.getLogger(__name__)

Stateful = NamespaceRequest | ClaimRequest | VerificationRun | Workload
NS, CS, RS = NamespaceRequest.State, ClaimRequest.State, VerificationRun.State
WS = Workload.State
ES = ClaimExtension.State


@dataclass(frozen=True)
class Change:
    sources: tuple[str, ...]
    to: str


# A claim that exists, or is being made, in the cluster.
LIVE_CLAIMS = (CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE)
# A run that has not ended.
OPEN_RUNS = (RS.QUEUED, RS.CREATING, RS.PENDING, RS.RUNNING)
# A workload that has not ended.
OPEN_WORKLOADS = (WS.PENDING, WS.APPLYING, WS.STARTED, WS.RUNNING)

CHANGES: dict[type[models.Model], dict[str, Change]] = {
    NamespaceRequest: {
        "approve": Change((NS.PENDING,), NS.APPROVED),
        "reject": Change((NS.PENDING,), NS.REJECTED),
        "withdraw": Change((NS.PENDING,), NS.DELETED),
        "created": Change((NS.APPROVED,), NS.ACTIVE),
        "fail": Change((NS.APPROVED, NS.ACTIVE), NS.FAILED),
        "retry": Change((NS.FAILED,), NS.APPROVED),
        # Gone or changed outside the portal: made again.
        "recreate": Change((NS.ACTIVE,), NS.APPROVED),
        "delete": Change((NS.APPROVED, NS.ACTIVE, NS.FAILED), NS.DELETING),
        "deleted": Change((NS.DELETING,), NS.DELETED),
    },
    ClaimRequest: {
        "approve": Change((CS.PENDING,), CS.APPROVED),
        "reject": Change((CS.PENDING,), CS.REJECTED),
        "apply": Change((CS.APPROVED,), CS.APPLYING),
        "applied": Change((CS.APPLYING,), CS.WAITING),
        "allocated": Change((CS.WAITING,), CS.IN_USE),
        "freed": Change((CS.IN_USE,), CS.WAITING),
        # The ResourceClaim is gone from the cluster: applied again.
        "reapply": Change(LIVE_CLAIMS, CS.APPROVED),
        "fail": Change(LIVE_CLAIMS, CS.FAILED),
        "retry": Change((CS.FAILED,), CS.APPROVED),
        "release": Change((CS.PENDING, *LIVE_CLAIMS, CS.FAILED), CS.RELEASED),
    },
    VerificationRun: {
        "create_pod": Change((RS.QUEUED,), RS.CREATING),
        "pod_created": Change((RS.CREATING,), RS.PENDING),
        # Still pending, with news (the scheduler's or kubelet's words).
        "pending": Change((RS.CREATING, RS.PENDING), RS.PENDING),
        "running": Change((RS.CREATING, RS.PENDING), RS.RUNNING),
        "succeeded": Change((RS.CREATING, RS.PENDING, RS.RUNNING), RS.SUCCEEDED),
        "pod_failed": Change((RS.CREATING, RS.PENDING, RS.RUNNING), RS.FAILED),
        # Ended by the portal: cancelled, its claim released or refused, no Pod to be had.
        "fail": Change(OPEN_RUNS, RS.FAILED),
        "claim_not_applied": Change((RS.QUEUED,), RS.FAILED),
    },
    Workload: {
        "apply": Change((WS.PENDING,), WS.APPLYING),
        "applied": Change((WS.APPLYING,), WS.STARTED),
        "running": Change((WS.STARTED,), WS.RUNNING),
        "succeeded": Change((WS.STARTED, WS.RUNNING), WS.SUCCEEDED),
        # Refused by the cluster, or its Pod or Job failed.
        "fail": Change(OPEN_WORKLOADS, WS.FAILED),
        # Stopped by its owner, or with its claim (released, expired): nothing outlives it.
        "stop": Change(OPEN_WORKLOADS, WS.STOPPED),
    },
    # A claim's extension is decided once (claims.domain.expiry); it lapses with its claim.
    ClaimExtension: {
        "approve": Change((ES.PENDING,), ES.APPROVED),
        "reject": Change((ES.PENDING,), ES.REJECTED),
        "lapse": Change((ES.PENDING,), ES.REJECTED),
    },
}


def change(
    obj: Stateful, name: str, *, actor: Any = None, message: str = "", **fields: Any
) -> bool:
    """Make the named change (CHANGES) if obj is still in a state it may be made from; False
    if not, or if another writer changed obj first (obj is then refreshed)."""
    step = CHANGES[type(obj)][name]
    return transition(obj, to=step.to, allowed=step.sources, actor=actor, message=message, **fields)


def created(obj: Stateful, *, actor: Any, message: str) -> None:
    """obj was just created in its first state: its first message and audit row."""
    transition(obj, to=obj.state, actor=actor, message=message, initial=True)


# Sent inside the transaction of every state change (obj, from_state, to_state, actor,
# message): what follows a change (notices, a claim's lifetime) listens here, in one place.
state_changed = Signal()


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
    The mechanism under change() and created(), which the portal's code calls; tests use it
    to put a row in a state directly.

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
    for run in claim.runs.filter(state=RS.QUEUED):
        change(
            run,
            "claim_not_applied",
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


@dataclass(frozen=True)
class TaskToSend:
    """A task sent once the transaction commits (by name: no import of tasks)."""

    name: str
    args: tuple[Any, ...]
    countdown: float | None = None

    def __call__(self) -> None:
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        try:
            app.send_task(self.name, args=self.args, countdown=self.countdown, queue=queue)
        except Exception as error:  # a broker that is down: the reconciler sends it again
            log.warning("task %s%r not queued: %s", self.name, self.args, error)


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    """Send a task once the surrounding transaction commits (by name: no import of tasks)."""
    transaction.on_commit(TaskToSend(task_name, args, countdown), robust=True)
