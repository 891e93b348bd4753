"""Read queries for pages and the API, scoped to what the user may see."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import Count, Max, QuerySet
from django.http import Http404

from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.transitions import KINDS

APPROVERS_GROUP = "approvers"


def user_is_approver(user: Any) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return user.groups.filter(name=APPROVERS_GROUP).exists()


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def namespace_request_list(*, user: Any) -> QuerySet[NamespaceRequest]:
    qs = NamespaceRequest.objects.select_related("cluster", "owner", "decided_by")
    return qs if user_is_approver(user) else qs.filter(owner=user)


def claim_request_list(*, user: Any) -> QuerySet[ClaimRequest]:
    qs = ClaimRequest.objects.select_related("namespace_request__cluster", "owner", "decided_by")
    return qs if user_is_approver(user) else qs.filter(owner=user)


def verification_run_list(*, user: Any) -> QuerySet[VerificationRun]:
    qs = VerificationRun.objects.select_related("claim__namespace_request__cluster", "owner")
    return qs if user_is_approver(user) else qs.filter(owner=user)


def verification_run_list_with_logs(*, user: Any) -> QuerySet[VerificationRun]:
    """Runs with their logs fetched in one more query, for output that describes the logs."""
    return verification_run_list(user=user).prefetch_related("logs")


def namespace_request_get(*, user: Any, pk: int) -> NamespaceRequest:
    return _get_or_404(namespace_request_list(user=user), pk)


def claim_request_get(*, user: Any, pk: int) -> ClaimRequest:
    return _get_or_404(claim_request_list(user=user), pk)


def verification_run_get(*, user: Any, pk: int) -> VerificationRun:
    return _get_or_404(verification_run_list_with_logs(user=user), pk)


def _get_or_404(qs: QuerySet, pk: int) -> Any:
    try:
        return qs.get(pk=pk)
    except (qs.model.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


def namespaces_for_claims(*, user: Any) -> QuerySet[NamespaceRequest]:
    """The namespaces a user may put a new claim in."""
    live = ("pending", "approved", "active")
    return NamespaceRequest.objects.filter(owner=user, state__in=live).select_related("cluster")


def approval_queue(*, user: Any) -> dict[str, QuerySet]:
    """Pending requests, oldest first; empty for users who are not approvers."""
    if not user_is_approver(user):
        return {
            "namespaces": NamespaceRequest.objects.none(),
            "claims": ClaimRequest.objects.none(),
        }
    return {
        "namespaces": NamespaceRequest.objects.filter(state="pending")
        .select_related("cluster", "owner")
        .order_by("created"),
        "claims": ClaimRequest.objects.filter(state="pending")
        .select_related("namespace_request__cluster", "owner")
        .order_by("created"),
    }


def approval_count(user: Any) -> int:
    """How many requests wait for a decision (the number on the menu's Approvals link)."""
    queue = approval_queue(user=user)
    return queue["namespaces"].count() + queue["claims"].count()


def dashboard_fingerprint(*, user: Any) -> str:
    """Changes whenever a request or run the user may see is added, changed or removed.

    A few small aggregate queries, so an idle dashboard can ask often without rendering.
    """
    scope = {} if user_is_approver(user) else {"owner": user}
    parts = []
    for model in (NamespaceRequest, ClaimRequest, VerificationRun):
        seen = model.objects.filter(**scope).aggregate(
            rows=Count("pk"), newest=Max("pk"), changed=Max("updated")
        )
        parts.append(f"{seen['rows']}:{seen['newest']}:{seen['changed']}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def events_for(obj: NamespaceRequest | ClaimRequest | VerificationRun) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(object_kind=KINDS[type(obj)], object_id=obj.pk).select_related(
        "actor"
    )


def audit_event_list(*, user: Any) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.select_related("actor", "owner")
    return qs if user_is_approver(user) else qs.filter(owner=user)


def device_classes(*, cluster: Cluster) -> list[dict[str, Any]]:
    """Device classes of the cluster with how many devices each has, from the last sync."""
    counts = cluster.inventory.get("device_counts", {})
    return [
        {**dc, "device_count": counts.get(dc["name"], 0)}
        for dc in cluster.inventory.get("device_classes", [])
    ]
