"""The claim requests a user asks for: submit, approve, reject, release, expire and retry;
an approver moves a waiting claim up or down in its queue."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.domain import dry_run, state_messages
from claims.domain.services.namespaces import _approve_namespace, namespace_request_retry
from claims.domain.services.steps import (
    User,
    _change,
    _create_pending,
    _decide,
    _release,
    _require_owner_or_approver,
    _require_reason,
)
from claims.domain.transitions import enqueue, fail_queued_runs, record_event, update_fields
from claims.models import ClaimRequest, NamespaceRequest
from claims.policy import feasibility, quota, rules
from claims.policy.device_picker import Picks
from claims.policy.validation import (
    alternative_key,
    claim_selector,
    further_alternatives,
    selector_field_of,
    validate_claim_fields,
)
from claims.read import queue, selectors

NS = NamespaceRequest.State
CS = ClaimRequest.State


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
    alternatives: list[dict[str, Any]] | None = None,
    ask_cluster: bool = False,
) -> ClaimRequest:
    """A new claim, pending approval (or approved by a rule). With ask_cluster, after the
    portal's own checks the cluster dry-runs its ResourceClaim (claims.domain.dry_run): a
    refusal is a field error, a cluster that cannot be asked leaves a note for the approver."""
    ns = namespace_request
    _require_owner_or_approver(user, ns.owner_id)
    _require_open_namespace(ns)
    name, written = (name or "").strip(), (selector or "").strip()
    picks = Picks(gpu_model.strip(), min_memory.strip(), mig_profile.strip())
    count = None if all_devices else count
    fields: dict[str, Any] = {
        "name": name,
        "device_class": device_class,
        "count": count,
        "all_devices": all_devices,
    }
    # Every alternative's problems at once, each next to its own field.
    errors: dict[str, list[str]] = {}
    further: list[dict[str, Any]] = []
    try:
        fields["selector"] = claim_selector(
            cluster=ns.cluster, device_class=device_class, picks=picks, selector=written
        )
        validate_claim_fields(cluster=ns.cluster, picks=picks, written=written, **fields)
    except ValidationError as error:
        errors |= error.message_dict
    try:
        further = further_alternatives(
            cluster=ns.cluster, alternatives=alternatives or [], written=written
        )
    except ValidationError as error:
        errors |= error.message_dict
    if errors:
        raise ValidationError(errors)
    selector = fields["selector"]
    fields["further_alternatives"] = further
    _check_counts(
        ns, [{"device_class": device_class, "count": count, "selector": selector}, *further]
    )
    dry_run_note = ""
    if ask_cluster:
        unsaved = ClaimRequest(namespace_request=ns, **asdict(picks), **fields)
        selector_field = selector_field_of(picks, written)
        dry_run_note = dry_run.claim_note(unsaved, selector_field=selector_field)
    duplicate = {
        "name": [
            _("A claim named %(name)r already exists in namespace %(namespace)s.")
            % {"name": name, "namespace": ns.name}
        ]
    }
    with transaction.atomic():
        # Decided under the team's row lock: parallel submits cannot all fit the last unit.
        team = quota.team_to_charge(ns.owner, ns.cluster, [fields, *further])
        problem = quota.submit_problem(team, namespace_request=ns, alternatives=[fields, *further])
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


def _check_counts(ns: NamespaceRequest, alternatives: list[dict[str, Any]]) -> None:
    """A field error on the count of each alternative no single node has enough for."""
    errors = {}
    for position, alt in enumerate(alternatives, start=1):
        try:
            feasibility.check_count(
                cluster=ns.cluster,
                device_class=alt["device_class"],
                count=alt["count"],
                selector=alt["selector"],
            )
        except ValidationError as error:
            key = "count" if position == 1 else alternative_key(position, "count")
            errors[key] = error.message_dict["count"]
    if errors:
        raise ValidationError(errors)


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
        team = None if quota_checked else quota.claim_team_to_charge(claim)
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
        _decide(claim, "approve", actor=actor, message=message)
        if ns.state == NS.PENDING:
            # Applied by the claim's task, namespace first: a task of its own would race it
            # and write the namespace twice.
            _approve_namespace(ns, actor, message, apply=False)
        enqueue("claims.worker.tasks.apply_claim", claim.pk)


def claim_request_reject(*, user: User, claim_request: ClaimRequest, reason: str) -> ClaimRequest:
    rules.require_decider(user, claim_request, approving=False)
    reason = _require_reason(reason)
    with transaction.atomic():
        _decide(claim_request, "reject", actor=user, message=reason)
        rejected = state_messages.CLAIM_REJECTED % {"reason": reason}
        fail_queued_runs(claim_request, message=rejected, actor=user)
    return claim_request


def claim_request_release(
    *, user: User, claim_request: ClaimRequest, force: bool = False
) -> ClaimRequest:
    """Give the claim back: the cluster objects (claim and its runs' pods) are deleted.

    A run whose log has not been read yet (its kubelet unreachable) loses it with its Pod:
    refused unless `force`, so the one releasing knows (the confirmation page says it)."""
    _require_owner_or_approver(user, claim_request.owner_id)
    unread = selectors.runs_with_unread_logs(claim_request)
    if unread and not force:
        message = _(
            "The log of run %(runs)s has not been read yet; releasing deletes its Pod and the "
            "log with it. Release with force to do it anyway."
        ) % {"runs": ", ".join(str(run) for run in unread)}
        raise ValidationError({NON_FIELD_ERRORS: [message]})
    with transaction.atomic():
        _release(claim_request, user, "Released.", enqueue_cleanup=True)
    return claim_request


def claim_request_expire(*, claim_request: ClaimRequest, message: str) -> ClaimRequest:
    """The claim's lifetime ended (claims.domain.expiry): released by the portal itself."""
    with transaction.atomic():
        _release(claim_request, AnonymousUser(), message, enqueue_cleanup=True)
    return claim_request


def claim_request_reclaim_idle(*, claim_request: ClaimRequest, message: str) -> ClaimRequest:
    """Idle past its warning's deadline (claims.domain.idle_reclaim): released by the portal,
    its workloads stopped, as a release by its owner."""
    with transaction.atomic():
        _release(claim_request, AnonymousUser(), message, enqueue_cleanup=True)
    return claim_request


def claim_request_retry(*, user: User, claim_request: ClaimRequest) -> ClaimRequest:
    claim = claim_request
    _require_owner_or_approver(user, claim.owner_id)
    with transaction.atomic():
        # A failed claim holds nothing: going live again must fit the quota as it is now.
        team = quota.claim_team_to_charge(claim)
        if problem := quota.approval_problem(team, claim):
            raise ValidationError(
                {NON_FIELD_ERRORS: [_("Over the quota now: %(problem)s") % {"problem": problem}]}
            )
        _change(
            claim,
            "retry",
            actor=user,
            message=gettext_noop("Retried."),
        )
        ns = claim.namespace_request
        if ns.state == NS.FAILED:
            namespace_request_retry(user=user, namespace_request=ns)
        enqueue("claims.worker.tasks.apply_claim", claim.pk)
    return claim


QUEUE_MOVES = ("up", "down")


def claim_request_queue_move(
    *, user: User, claim_request: ClaimRequest, direction: str, reason: str
) -> ClaimRequest:
    """Move a waiting claim up (before the claims of lower priority) or down, by one step of
    priority; the reason goes on its audit trail. The queue's order is priority, then age."""
    rules.require_decider(user, claim_request, approving=False)
    if direction not in QUEUE_MOVES:
        raise ValidationError({"direction": [_("Choose up or down.")]})
    reason = _require_reason(reason)
    with transaction.atomic():
        claim = ClaimRequest.objects.select_for_update().get(pk=claim_request.pk)
        if queue.spot_of(claim) is None:
            message = _("This claim does not wait for devices: it has no place in a queue.")
            raise ValidationError({NON_FIELD_ERRORS: [message]})
        before = claim.queue_priority
        after = before + (1 if direction == "up" else -1)
        update_fields(claim, queue_priority=after)
        words = _("Moved up in the queue") if direction == "up" else _("Moved down in the queue")
        record_event(claim, f"{words} ({before} → {after}): {reason}", user, action="queue_moved")
    claim_request.queue_priority = after
    return claim_request
