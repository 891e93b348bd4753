"""Every state change a user asks for goes through one function here.

Each function takes keyword-only arguments, checks permission and the transition, writes the
row and an AuditEvent, and enqueues the cluster work once the transaction commits.
Bad input raises ValidationError with a dict of field errors (NON_FIELD_ERRORS for a state
conflict); a forbidden action raises PermissionDenied. State changes the cluster reports
(through the Celery tasks) live in claims.observations.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims import feasibility, quota, rules, state_messages
from claims.device_picker import Picks
from claims.kube import names
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.selectors import user_is_approver
from claims.transitions import enqueue, fail_queued_runs, transition
from claims.validation import claim_selector, validate_claim_fields, validate_namespace_name

User = AbstractBaseUser | AnonymousUser
NS = NamespaceRequest.State
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


def namespace_request_submit(
    *, user: User, cluster: Cluster, name: str, purpose: str = "", dry_run_note: str = ""
) -> NamespaceRequest:
    _require_login(user)
    name = (name or "").strip()
    validate_namespace_name(name)
    duplicate = {
        "name": [
            _("Namespace %(name)r is already requested on %(cluster)s.")
            % {"name": name, "cluster": cluster}
        ]
    }
    if NamespaceRequest.objects.filter(cluster=cluster, name=name, state=NS.DELETING).exists():
        # The cluster is still removing it: a new request would meet a terminating namespace.
        duplicate = {
            "name": [
                _("Namespace %(name)s is still being deleted; try again when it is gone.")
                % {"name": name}
            ]
        }
    with transaction.atomic():
        ns = _create_pending(
            NamespaceRequest,
            user=user,
            duplicate=duplicate,
            cluster=cluster,
            name=name,
            purpose=(purpose or "").strip(),
            dry_run_note=dry_run_note,
        )
        if approval := rules.namespace_auto_approval(quota.team_of(user), ns):
            _approve_namespace(ns, None, approval)
    return ns


def namespace_request_approve(
    *, user: User, namespace_request: NamespaceRequest
) -> NamespaceRequest:
    rules.require_decider(user, namespace_request, approving=True)
    _approve_namespace(namespace_request, user, gettext_noop("Approved."))
    return namespace_request


def _approve_namespace(ns: NamespaceRequest, actor: User | None, message: str) -> None:
    with transaction.atomic():
        _decide(ns, to=NS.APPROVED, actor=actor, message=message)
        enqueue("claims.tasks.apply_namespace", ns.pk)


def namespace_request_reject(
    *, user: User, namespace_request: NamespaceRequest, reason: str
) -> NamespaceRequest:
    rules.require_decider(user, namespace_request, approving=False)
    reason = _require_reason(reason)
    ns = namespace_request
    with transaction.atomic():
        _decide(ns, to=NS.REJECTED, actor=user, message=reason)
        rejected = state_messages.NAMESPACE_REJECTED % {"namespace": ns.name, "reason": reason}
        _reject_claims_of(ns, user, rejected)
    return ns


def namespace_request_retry(*, user: User, namespace_request: NamespaceRequest) -> NamespaceRequest:
    ns = namespace_request
    _require_owner_or_approver(user, ns.owner_id)
    with transaction.atomic():
        _change(
            ns, to=NS.APPROVED, allowed=(NS.FAILED,), actor=user, message=gettext_noop("Retried.")
        )
        enqueue("claims.tasks.apply_namespace", ns.pk)
    return ns


def namespace_request_delete(
    *, user: User, namespace_request: NamespaceRequest
) -> NamespaceRequest:
    """Release every claim in the namespace and delete it from the cluster."""
    ns = namespace_request
    _require_owner_or_approver(user, ns.owner_id)
    with transaction.atomic():
        if ns.state == NS.PENDING:
            # Nothing exists in the cluster yet: withdrawing is enough.
            _change(
                ns,
                to=NS.DELETED,
                allowed=(NS.PENDING,),
                actor=user,
                message=gettext_noop("Withdrawn."),
            )
            _reject_claims_of(ns, user, state_messages.NAMESPACE_WITHDRAWN)
            return ns
        _change(
            ns,
            to=NS.DELETING,
            allowed=(NS.APPROVED, NS.ACTIVE, NS.FAILED),
            actor=user,
            message=gettext_noop("Deletion requested."),
        )
        for claim in ns.claim_requests.exclude(state__in=ClaimRequest.FINAL_STATES):
            _release(claim, user, state_messages.RELEASED_WITH_NAMESPACE, enqueue_cleanup=False)
        enqueue("claims.tasks.delete_namespace", ns.pk)
    return ns


def _reject_claims_of(ns: NamespaceRequest, user: User, message: str) -> None:
    for claim in ns.claim_requests.filter(state=CS.PENDING):
        if transition(claim, to=CS.REJECTED, allowed=(CS.PENDING,), actor=user, message=message):
            rejected = state_messages.CLAIM_REJECTED % {"reason": message}
            fail_queued_runs(claim, message=rejected, actor=user)


def claim_request_submit(
    *,
    user: User,
    namespace_request: NamespaceRequest,
    name: str,
    device_class: str,
    count: int | None = 1,
    all_devices: bool = False,
    selector: str = "",
    purpose: str = "",
    gpu_model: str = "",
    min_memory: str = "",
    mig_profile: str = "",
    dry_run_note: str = "",
) -> ClaimRequest:
    ns = namespace_request
    _require_owner_or_approver(user, ns.owner_id)
    _require_open_namespace(ns)
    name, written = (name or "").strip(), (selector or "").strip()
    picks = Picks(gpu_model.strip(), min_memory.strip(), mig_profile.strip())
    selector = claim_selector(
        cluster=ns.cluster, device_class=device_class, picks=picks, selector=written
    )
    count = None if all_devices else count
    fields: dict[str, Any] = {
        "name": name,
        "device_class": device_class,
        "count": count,
        "all_devices": all_devices,
        "selector": selector,
    }
    validate_claim_fields(cluster=ns.cluster, picks=picks, written=written, **fields)
    feasibility.check_count(
        cluster=ns.cluster, device_class=device_class, count=count, selector=selector
    )
    duplicate = {
        "name": [
            _("A claim named %(name)r already exists in namespace %(namespace)s.")
            % {"name": name, "namespace": ns.name}
        ]
    }
    with transaction.atomic():
        # Decided under the team's row lock: parallel submits cannot all fit the last unit.
        team = quota.locked_team_of(ns.owner)
        problem = quota.submit_problem(
            team,
            namespace_request=ns,
            device_class=device_class,
            count=count,
            all_devices=all_devices,
        )
        if problem:
            raise ValidationError({"count": [problem]})
        # The claim is the namespace owner's, even when an approver made it for them: they
        # hold the namespace's access, run its verifications and are charged its quota.
        claim = _create_pending(
            ClaimRequest,
            user=user,
            duplicate=duplicate,
            owner=ns.owner,
            namespace_request=ns,
            purpose=(purpose or "").strip(),
            dry_run_note=dry_run_note,
            **asdict(picks),
            **fields,
        )
        if approval := rules.claim_auto_approval(team, claim):
            # The quota was checked above under the same lock, pending claims counted: an
            # approval, which counts only decided ones, fits too.
            _approve_claim(claim, None, approval, quota_checked=True)
    return claim


def _require_open_namespace(ns: NamespaceRequest) -> None:
    if ns.state not in (NS.PENDING, NS.APPROVED, NS.ACTIVE):
        raise ValidationError(
            {
                "namespace_request": [
                    _("Namespace %(name)s is %(state)s: claims cannot go there.")
                    % {"name": ns.name, "state": ns.get_state_display()}
                ]
            }
        )


def _create_pending(model: Any, *, user: User, duplicate: dict, **fields: Any) -> Any:
    """Insert a new request; the database's unique constraint turns a double submit away."""
    try:
        with transaction.atomic():
            obj = model.objects.create(
                **{"owner": user, "state_message": AWAITING_APPROVAL, **fields}
            )
            transition(obj, to="pending", actor=user, message=AWAITING_APPROVAL, initial=True)
    except IntegrityError:
        raise ValidationError(duplicate) from None
    return obj


def claim_request_approve(*, user: User, claim_request: ClaimRequest) -> ClaimRequest:
    """Approve a claim; its namespace is approved with it when still pending."""
    rules.require_decider(user, claim_request, approving=True)
    _approve_claim(claim_request, user, gettext_noop("Approved."))
    return claim_request


def _approve_claim(
    claim: ClaimRequest, actor: User | None, message: str, *, quota_checked: bool = False
) -> None:
    with transaction.atomic():
        # The quota may have shrunk since the request: check again under the team's lock.
        team = None if quota_checked else quota.locked_team_of(claim.owner)
        if team is not None and (problem := quota.approval_problem(team, claim)):
            raise ValidationError(
                {NON_FIELD_ERRORS: [_("Over the quota now: %(problem)s") % {"problem": problem}]}
            )
        # Locked, so approvals racing over one pending namespace approve it once, and the
        # loser of a race over this claim hears about the claim rather than its namespace.
        known = claim.namespace_request
        ns = NamespaceRequest.objects.select_for_update().get(pk=claim.namespace_request_id)
        if NamespaceRequest.cluster.is_cached(known):
            ns.cluster = known.cluster  # read already; the lock is for the namespace's state
        claim.namespace_request = ns
        if ns.state not in (NS.PENDING, NS.APPROVED, NS.ACTIVE):
            raise ValidationError(
                {
                    NON_FIELD_ERRORS: [
                        _("Namespace %(name)s is %(state)s; fix it first.")
                        % {"name": ns.name, "state": ns.get_state_display()}
                    ]
                }
            )
        _decide(claim, to=CS.APPROVED, actor=actor, message=message)
        if ns.state == NS.PENDING:
            _approve_namespace(ns, actor, message)
        enqueue("claims.tasks.apply_claim", claim.pk)


def claim_request_reject(*, user: User, claim_request: ClaimRequest, reason: str) -> ClaimRequest:
    rules.require_decider(user, claim_request, approving=False)
    reason = _require_reason(reason)
    with transaction.atomic():
        _decide(claim_request, to=CS.REJECTED, actor=user, message=reason)
        rejected = state_messages.CLAIM_REJECTED % {"reason": reason}
        fail_queued_runs(claim_request, message=rejected, actor=user)
    return claim_request


def claim_request_release(*, user: User, claim_request: ClaimRequest) -> ClaimRequest:
    """Give the claim back: the cluster objects (claim and its runs' pods) are deleted."""
    _require_owner_or_approver(user, claim_request.owner_id)
    with transaction.atomic():
        _release(claim_request, user, "Released.", enqueue_cleanup=True)
    return claim_request


def claim_request_expire(*, claim_request: ClaimRequest, message: str) -> ClaimRequest:
    """The claim's lifetime ended (claims.expiry): released by the portal itself."""
    with transaction.atomic():
        _release(claim_request, AnonymousUser(), message, enqueue_cleanup=True)
    return claim_request


def _release(claim: ClaimRequest, user: User, message: str, *, enqueue_cleanup: bool) -> None:
    allowed = (CS.PENDING, CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE, CS.FAILED)
    # The sync flips an applied claim between waiting and in use as Pods come and go; lock
    # the row so a release does not lose to that (its conditional UPDATE loses instead).
    ClaimRequest.objects.select_for_update().filter(pk=claim.pk).first()
    claim.refresh_from_db(fields=["state"])
    was_applied = claim.state != CS.PENDING
    _change(claim, to=CS.RELEASED, allowed=allowed, actor=user, message=message)
    for run in claim.runs.exclude(state__in=VerificationRun.FINAL_STATES):
        transition(
            run,
            to=RS.FAILED,
            allowed=tuple(RS),
            actor=user,
            message=gettext_noop("The claim was released."),
            finished_at=timezone.now(),
        )
    if not was_applied:
        ClaimRequest.objects.filter(pk=claim.pk).update(cleaned_up_at=timezone.now())
    elif enqueue_cleanup:
        enqueue("claims.tasks.delete_claim", claim.pk)


def claim_request_retry(*, user: User, claim_request: ClaimRequest) -> ClaimRequest:
    claim = claim_request
    _require_owner_or_approver(user, claim.owner_id)
    with transaction.atomic():
        # A failed claim holds nothing: going live again must fit the quota as it is now.
        if problem := quota.approval_problem(quota.locked_team_of(claim.owner), claim):
            raise ValidationError(
                {NON_FIELD_ERRORS: [_("Over the quota now: %(problem)s") % {"problem": problem}]}
            )
        _change(
            claim,
            to=CS.APPROVED,
            allowed=(CS.FAILED,),
            actor=user,
            message=gettext_noop("Retried."),
        )
        ns = claim.namespace_request
        if ns.state == NS.FAILED:
            namespace_request_retry(user=user, namespace_request=ns)
        enqueue("claims.tasks.apply_claim", claim.pk)
    return claim


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
        message = (
            gettext_noop("Queued.") if claim.state in (CS.WAITING, CS.IN_USE) else QUEUED_ON_CLAIM
        )
        run = VerificationRun.objects.create(
            claim=claim, owner_id=claim.owner_id, state_message=message
        )
        # Named by the run's id: unique per run even across claims sharing a long prefix.
        run.pod_name = names.verification_pod_name(claim.name, run.pk)
        run.save(update_fields=["pod_name"])
        transition(run, to=RS.QUEUED, actor=user, message=message, initial=True)
        enqueue("claims.tasks.start_verification_run", run.pk)
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
        transition(
            run,
            to=RS.FAILED,
            allowed=(run.state,),
            actor=user,
            message=state_messages.CANCELLED_BY % {"user": user.get_username()},
            finished_at=timezone.now(),
        )
        enqueue("claims.tasks.delete_run_pod", run.pk)
    return run


def _decide(
    obj: NamespaceRequest | ClaimRequest, *, to: str, actor: User | None, message: str
) -> None:
    """Pending → approved or rejected, recording who decided and when."""
    _change(
        obj,
        to=to,
        allowed=("pending",),
        actor=actor,
        message=message,
        decided_by=actor,
        decided_at=timezone.now(),
    )


def _change(
    obj: NamespaceRequest | ClaimRequest,
    *,
    to: str,
    allowed: tuple,
    actor: User | None,
    message: str = "",
    **fields: Any,
) -> None:
    if not transition(obj, to=to, allowed=allowed, actor=actor, message=message, **fields):
        label = obj.get_state_display()
        message = _("%(name)s is already %(state)s.") % {"name": obj.name, "state": label}
        raise ValidationError({NON_FIELD_ERRORS: [message]})


__all__ = [
    "claim_request_approve",
    "claim_request_expire",
    "claim_request_reject",
    "claim_request_release",
    "claim_request_retry",
    "claim_request_submit",
    "namespace_request_approve",
    "namespace_request_delete",
    "namespace_request_reject",
    "namespace_request_retry",
    "namespace_request_submit",
    "verification_run_cancel",
    "verification_run_start",
]
