"""Steps the namespace, claim and run services share: who may act, the checked state change.

Also the insert of a new pending request and the release of a claim, which a namespace's
deletion does for each of its claims.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.domain import observations
from claims.domain.transitions import change, created, enqueue
from claims.models import ClaimRequest, NamespaceRequest, VerificationRun, Workload
from claims.read.selectors import user_is_approver

User = AbstractBaseUser | AnonymousUser
CS = ClaimRequest.State
RS = VerificationRun.State
AWAITING_APPROVAL = gettext_noop("Requested. Waiting for an approver.")


def _require_login(user: User) -> None:
    if not user.is_authenticated:
        raise PermissionDenied(_("Log in first."))


def _require_owner_or_approver(user: User, owner_id: int) -> None:
    _require_login(user)
    if user.pk != owner_id and not user_is_approver(user):
        raise PermissionDenied(_("This request belongs to someone else."))


def _require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": [_("Say why, so the requester knows what to change.")]})
    return reason


def _create_pending(model: Any, *, user: User, duplicate: dict, **fields: Any) -> Any:
    """Insert a new request; the database's unique constraint turns a double submit away."""
    try:
        with transaction.atomic():
            obj = model.objects.create(
                **{"owner": user, "state_message": AWAITING_APPROVAL, **fields}
            )
            created(obj, actor=user, message=AWAITING_APPROVAL)
    except IntegrityError:
        raise ValidationError(duplicate) from None
    return obj


def _release(claim: ClaimRequest, user: User, message: str, *, enqueue_cleanup: bool) -> None:
    # The sync flips an applied claim between waiting and in use as Pods come and go; lock
    # the row so a release does not lose to that (its conditional UPDATE loses instead).
    ClaimRequest.objects.select_for_update().filter(pk=claim.pk).first()
    claim.refresh_from_db(fields=["state"])
    was_applied = claim.state != CS.PENDING
    _change(claim, "release", actor=user, message=message)
    for run in claim.runs.exclude(state__in=VerificationRun.FINAL_STATES):
        change(
            run,
            "fail",
            actor=user,
            message=gettext_noop("The claim was released."),
            finished_at=timezone.now(),
        )
    # Nothing the portal started outlives its claim: its workloads stop with it, and the
    # claim's cleanup deletes their objects before the ResourceClaim.
    stop_claim_workloads(claim, actor=user, message=gettext_noop("The claim was released."))
    if not was_applied:
        observations.claim_cleaned_up(claim_request=claim)
    elif enqueue_cleanup:
        enqueue("claims.worker.tasks.delete_claim", claim.pk)


def stop_claim_workloads(claim: ClaimRequest, *, actor: Any, message: str) -> list[Workload]:
    """The claim is going: its workloads still going end stopped (in the caller's
    transaction); the claim's cleanup deletes their objects before the ResourceClaim."""
    stopped = []
    for workload in claim.workloads.exclude(state__in=Workload.FINAL_STATES):
        if change(workload, "stop", actor=actor, message=message, finished_at=timezone.now()):
            stopped.append(workload)
    return stopped


def _decide(
    obj: NamespaceRequest | ClaimRequest, decision: str, *, actor: User | None, message: str
) -> None:
    """Pending → approved or rejected ("approve", "reject"), recording who decided and when."""
    _change(
        obj,
        decision,
        actor=actor,
        message=message,
        decided_by=actor,
        decided_at=timezone.now(),
    )


def _change(
    obj: NamespaceRequest | ClaimRequest,
    name: str,
    *,
    actor: User | None,
    message: str = "",
    **fields: Any,
) -> None:
    if not change(obj, name, actor=actor, message=message, **fields):
        label = obj.get_state_display()
        message = _("%(name)s is already %(state)s.") % {"name": obj.name, "state": label}
        raise ValidationError({NON_FIELD_ERRORS: [message]})
