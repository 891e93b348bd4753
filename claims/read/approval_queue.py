"""The approval queue: pending requests an approver decides, as filtered, and how many wait
(up to a bound)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from claims.kube.manifests import MAX_ALTERNATIVES
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.models.teams import first_team_id, first_team_members
from claims.read.selectors import CLAIM_JSON, CLUSTER_JSON, _without, decider_scope


@dataclass(frozen=True)
class QueueFilter:
    """What an approver narrows the queue to; empty fields do not narrow."""

    kind: str = ""  # "namespace", "claim" or both
    cluster: int | None = None
    requester: str = ""
    device_class: str = ""
    team: int | None = None  # the requester's team: the one charged for, and deciding, it
    older_than: int | None = None  # hours waited at least

    @cached_property
    def _team_members(self) -> list[int]:
        return first_team_members([self.team]) if self.team is not None else []

    def _common(self) -> Q:
        found = Q()
        if self.requester:
            found &= Q(owner__username=self.requester)
        if self.team is not None:
            found &= Q(owner_id__in=self._team_members)
        if self.older_than is not None:
            found &= Q(created__lte=timezone.now() - timedelta(hours=self.older_than))
        return found

    def shows(self, kind: str) -> bool:
        # Namespaces have no device class: asking for one shows claims only.
        wanted = self.kind or ("claim" if self.device_class else "")
        return wanted in ("", kind)

    def namespaces(self) -> Q:
        found = self._common()
        if self.cluster is not None:
            found &= Q(cluster_id=self.cluster)
        return found

    def claims(self) -> Q:
        found = self._common()
        if self.cluster is not None:
            found &= Q(namespace_request__cluster_id=self.cluster)
        if self.device_class:
            found &= of_class(self.device_class)
        return found


def of_class(device_class: str) -> Q:
    """Claims any of whose alternatives is of the class ("H100, else A100" shows under a
    filter on the A100s' class): a key per position, which SQLite and PostgreSQL both read
    (SQLite has no JSON containment)."""
    found = Q(device_class=device_class)
    for index in range(MAX_ALTERNATIVES - 1):
        found |= Q(**{f"further_alternatives__{index}__device_class": device_class})
    return found


def approval_queue(*, user: Any, shown: QueueFilter | None = None) -> dict[str, QuerySet]:
    """Pending requests, oldest first; empty for users who are not approvers.

    The rows carry no cluster inventory or claim manifests: a page of them must not decode
    one large JSON value per row (with_clusters attaches the clusters once per page)."""
    shown = shown or QueueFilter()
    scope = decider_scope(user)
    if scope is None:
        return {
            "namespaces": NamespaceRequest.objects.none(),
            "claims": ClaimRequest.objects.none(),
        }
    namespaces = NamespaceRequest.objects.filter(scope, shown.namespaces(), state="pending")
    claims = ClaimRequest.objects.filter(scope, shown.claims(), state="pending")
    cluster = _without("namespace_request__cluster", fields=CLUSTER_JSON)
    return {
        "namespaces": namespaces.select_related("cluster", "owner")
        .defer(*_without("cluster", fields=CLUSTER_JSON))
        .order_by("created", "id"),
        "claims": claims.select_related("namespace_request__cluster", "owner")
        .defer(*CLAIM_JSON, *cluster)
        .annotate(owner_team_id=first_team_id(OuterRef("owner_id")))
        .order_by("created", "id"),
    }


def seen_rows(*, user: Any, model: type[Any], ids: set[int]) -> list[Any]:
    """Rows the approver saw on the page before, whatever their state now (a decision shows
    where the request was), among the requests they decide."""
    scope = decider_scope(user)
    if scope is None:
        return []
    cluster = "cluster" if model is NamespaceRequest else "namespace_request__cluster"
    found = model.objects.filter(scope, pk__in=ids).select_related("owner", "decided_by", cluster)
    return list(found)


def with_clusters(
    claims: list[ClaimRequest], clusters: list[Cluster] | None = None
) -> list[ClaimRequest]:
    """The claims with their clusters' inventories: from `clusters` when the page read them
    already, else in one query for the whole page."""
    ids = {claim.namespace_request.cluster_id for claim in claims}
    if clusters is None:
        clusters = list(Cluster.objects.filter(pk__in=ids))
    by_id = {cluster.pk: cluster for cluster in clusters}
    for claim in claims:
        claim.namespace_request.cluster = by_id[claim.namespace_request.cluster_id]
    return claims


# The menu counts the queue up to this many of each kind, then says "99+".
COUNTED = 100


def approval_count(user: Any) -> int:
    """How many requests wait for a decision (the number on the menu's Approvals link),
    counted up to COUNTED of each kind: the menu says "99+" beyond, and a count of
    a long queue would grow with it on every page an approver opens."""
    scope = decider_scope(user)
    if scope is None:
        return 0
    # One query. The LIMIT sits in each part's IN subquery, not in the parts themselves:
    # SQLite (make run's database) refuses LIMIT in a member of a compound statement.
    parts = [
        model.objects.filter(pk__in=Subquery(pending.order_by().values("pk")[:COUNTED]))
        .order_by()
        .values("pk")
        for model, pending in (
            (NamespaceRequest, NamespaceRequest.objects.filter(scope, state="pending")),
            (ClaimRequest, ClaimRequest.objects.filter(scope, state="pending")),
        )
    ]
    return parts[0].union(parts[1], all=True).count()
