"""The namespace requests a user asks for: submit, approve, reject, retry and delete."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.domain import dry_run, state_messages
from claims.domain.services.steps import (
    User,
    _change,
    _create_pending,
    _decide,
    _release,
    _require_login,
    _require_owner_or_approver,
    _require_reason,
)
from claims.domain.transitions import change, enqueue, fail_queued_runs
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.policy import quota, rules
from claims.policy.validation import validate_namespace_name

NS = NamespaceRequest.State
CS = ClaimRequest.State


def namespace_request_submit(
    *, user: User, cluster: Cluster, name: str, purpose: str = "", ask_cluster: bool = False
) -> NamespaceRequest:
    """A new namespace request, pending approval (or approved by a rule). With ask_cluster
    the cluster dry-runs its Namespace first (claims.domain.dry_run)."""
    _require_login(user)
    name = (name or "").strip()
    validate_namespace_name(name)
    dry_run_note = dry_run.namespace_note(cluster, name) if ask_cluster else ""
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


def _approve_namespace(
    ns: NamespaceRequest, actor: User | None, message: str, *, apply: bool = True
) -> None:
    """apply=False: the task of a claim approved with it applies it first (one write)."""
    with transaction.atomic():
        _decide(ns, "approve", actor=actor, message=message)
        if apply:
            enqueue("claims.worker.tasks.apply_namespace", ns.pk)


def namespace_request_reject(
    *, user: User, namespace_request: NamespaceRequest, reason: str
) -> NamespaceRequest:
    rules.require_decider(user, namespace_request, approving=False)
    reason = _require_reason(reason)
    ns = namespace_request
    with transaction.atomic():
        _decide(ns, "reject", actor=user, message=reason)
        rejected = state_messages.NAMESPACE_REJECTED % {"namespace": ns.name, "reason": reason}
        _reject_claims_of(ns, user, rejected)
    return ns


def namespace_request_retry(*, user: User, namespace_request: NamespaceRequest) -> NamespaceRequest:
    ns = namespace_request
    _require_owner_or_approver(user, ns.owner_id)
    with transaction.atomic():
        _change(ns, "retry", actor=user, message=gettext_noop("Retried."))
        enqueue("claims.worker.tasks.apply_namespace", ns.pk)
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
                "withdraw",
                actor=user,
                message=gettext_noop("Withdrawn."),
            )
            _reject_claims_of(ns, user, state_messages.NAMESPACE_WITHDRAWN)
            return ns
        _change(
            ns,
            "delete",
            actor=user,
            message=gettext_noop("Deletion requested."),
        )
        for claim in ns.claim_requests.exclude(state__in=ClaimRequest.FINAL_STATES):
            _release(claim, user, state_messages.RELEASED_WITH_NAMESPACE, enqueue_cleanup=False)
        enqueue("claims.worker.tasks.delete_namespace", ns.pk)
    return ns


def _reject_claims_of(ns: NamespaceRequest, user: User, message: str) -> None:
    for claim in ns.claim_requests.filter(state=CS.PENDING):
        if change(claim, "reject", actor=user, message=message):
            rejected = state_messages.CLAIM_REJECTED % {"reason": message}
            fail_queued_runs(claim, message=rejected, actor=user)
