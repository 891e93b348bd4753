"""The verification runs a user asks for: start one on a claim, cancel one still going."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.domain import state_messages
from claims.domain.services.steps import User, _require_owner_or_approver
from claims.domain.transitions import change, created, enqueue
from claims.kube import names
from claims.models import ClaimRequest, VerificationRun

CS = ClaimRequest.State
RS = VerificationRun.State

# A run may be queued as soon as its claim is requested (a script need not wait for the
# claim): the worker starts it the moment the claim is applied (cluster_ops.apply_claim).
RUNNABLE_CLAIMS = (CS.PENDING, CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE)
QUEUED_ON_CLAIM = gettext_noop("Queued; starts as soon as the claim is applied.")


def verification_run_start(*, user: User, claim_request: ClaimRequest) -> VerificationRun:
    """Create the seed's pod1 for this claim: vectorAdd and deviceQuery on its GPU."""
    claim = claim_request
    _require_owner_or_approver(user, claim.owner_id)
    with transaction.atomic():
        # Lock the claim so a double submit cannot start two runs.
        claim = ClaimRequest.objects.select_for_update().get(pk=claim.pk)
        if claim.state not in RUNNABLE_CLAIMS:
            raise ValidationError(
                {
                    NON_FIELD_ERRORS: [
                        _(
                            "The claim is %(state)s; a run needs a claim that is requested, "
                            "approved or applied."
                        )
                        % {"state": claim.get_state_display()}
                    ]
                }
            )
        if claim.runs.exclude(state__in=VerificationRun.FINAL_STATES).exists():
            raise ValidationError(
                {NON_FIELD_ERRORS: [_("A verification run of this claim is still going.")]}
            )
        applied = claim.state in (CS.WAITING, CS.IN_USE)
        message = gettext_noop("Queued.") if applied else QUEUED_ON_CLAIM
        run = VerificationRun.objects.create(
            claim=claim, owner_id=claim.owner_id, state_message=message
        )
        # Named by the run's id: unique per run even across claims sharing a long prefix.
        run.pod_name = names.verification_pod_name(claim.name, run.pk)
        run.save(update_fields=["pod_name"])
        created(run, actor=user, message=message)
        if applied:
            enqueue("claims.worker.tasks.start_verification_run", run.pk)
        # Else the claim's own task starts it once it applies the claim: the claim's row, locked
        # here, orders the two, so that task sees this run (and a task sent now would only
        # find the claim not applied yet).
    return run


def verification_run_cancel(*, user: User, run: VerificationRun) -> VerificationRun:
    """Stop a run that is still going: it ends failed, and its Pod is deleted so DRA frees
    the GPU."""
    _require_owner_or_approver(user, run.owner_id)
    with transaction.atomic():
        # Lock the row: the worker moves a run on (queued → creating → ...) all the time, and
        # a cancel must not lose to that; the worker's conditional UPDATE loses to it instead.
        VerificationRun.objects.select_for_update().filter(pk=run.pk).first()
        run.refresh_from_db(fields=["state"])
        if run.is_final:
            raise ValidationError(
                {
                    NON_FIELD_ERRORS: [
                        _("The run already ended (%(state)s): nothing to cancel.")
                        % {"state": run.get_state_display()}
                    ]
                }
            )
        change(
            run,
            "fail",
            actor=user,
            message=state_messages.CANCELLED_BY % {"user": user.get_username()},
            finished_at=timezone.now(),
        )
        enqueue("claims.worker.tasks.delete_run_pod", run.pk)
    return run
