"""Read queries for pages and the API, scoped to what the user may see."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Length
from django.http import Http404

from claims import changes
from claims.models import (
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    RunLog,
    Team,
    VerificationRun,
)
from claims.models.teams import approved_team_ids, first_team_id, first_team_members
from claims.transitions import KINDS

APPROVERS_GROUP = "approvers"
APPROVER_CACHE = "_portal_is_approver"


def user_is_approver(user: Any) -> bool:
    """Asked many times per request (menu, scoping, templates): the group is looked up once
    per user object, which Django loads afresh for every request (as its _perm_cache)."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    if not hasattr(user, APPROVER_CACHE):
        setattr(user, APPROVER_CACHE, user.groups.filter(name=APPROVERS_GROUP).exists())
    return bool(getattr(user, APPROVER_CACHE))


def decider_scope(user: Any) -> Q | None:
    """The requests the user decides: every one (staff approvers), their teams' (team
    approvers; claims.rules enforces the same), or none (None)."""
    if user_is_approver(user):
        return Q()
    teams = approved_team_ids(user)
    return Q(owner_id__in=first_team_members(teams)) if teams else None


def user_may_decide(user: Any) -> bool:
    return decider_scope(user) is not None


def team_list(*, user: Any) -> QuerySet[Team]:
    """Staff approvers see every team; everyone else the teams they are in."""
    teams = Team.objects.prefetch_related("memberships__user", "quotas__cluster")
    return teams.all() if user_is_approver(user) else teams.filter(memberships__user=user)


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def _visible(qs: QuerySet, user: Any) -> QuerySet:
    """Every request for staff approvers; a team approver's own and their teams'; else own."""
    if user_is_approver(user):
        return qs
    scope = decider_scope(user)
    return qs.filter(Q(owner=user) | scope) if scope is not None else qs.filter(owner=user)


def _runs_visible(qs: QuerySet, user: Any) -> QuerySet:
    """Runs: every one for staff approvers, else one's own."""
    return qs if user_is_approver(user) else qs.filter(owner=user)


def _namespace_requests() -> QuerySet[NamespaceRequest]:
    return NamespaceRequest.objects.select_related("cluster", "owner", "decided_by")


def _claim_requests() -> QuerySet[ClaimRequest]:
    return ClaimRequest.objects.select_related("namespace_request__cluster", "owner", "decided_by")


def _verification_runs() -> QuerySet[VerificationRun]:
    return VerificationRun.objects.select_related("claim__namespace_request__cluster", "owner")


def namespace_request_list(*, user: Any) -> QuerySet[NamespaceRequest]:
    return _visible(_namespace_requests(), user)


def claim_request_list(*, user: Any) -> QuerySet[ClaimRequest]:
    return _visible(_claim_requests(), user)


def verification_run_list(*, user: Any) -> QuerySet[VerificationRun]:
    return _runs_visible(_verification_runs(), user)


# Large JSON a list of rows does not show: each row would decode it (a cluster's inventory
# once per row that joins it).
CLUSTER_JSON = ("inventory", "resource_versions")
CLAIM_JSON = ("applied_manifest", "allocation")


def _without(*paths: str, fields: tuple[str, ...]) -> list[str]:
    return [f"{path}__{field}" if path else field for path in paths for field in fields]


def namespace_request_rows(*, user: Any) -> QuerySet[NamespaceRequest]:
    """namespace_request_list for a table of rows: without the cluster's inventory."""
    return namespace_request_list(user=user).defer(*_without("cluster", fields=CLUSTER_JSON))


def claim_request_rows(*, user: Any, with_allocation: bool = False) -> QuerySet[ClaimRequest]:
    """claim_request_list for a table of rows: without manifests, allocations, inventories."""
    cluster = _without("namespace_request__cluster", fields=CLUSTER_JSON)
    claim = [field for field in CLAIM_JSON if not (with_allocation and field == "allocation")]
    return claim_request_list(user=user).defer(*claim, *cluster)


# What the API's claim output shows: a page of 1,000 claims spent most of its time building
# model instances with every column of the claim, its namespace, cluster, owner and approver;
# the names of those four come as columns of the claim's row (ClaimRequestOutput reads them).
CLAIM_API_FIELDS = (
    *("name", "device_class", "count", "all_devices", "selector", "purpose", "state"),
    *("gpu_model", "min_memory", "mig_profile", "dry_run_note", "lifetime", "expires_at"),
    *("state_message", "decided_at", "applied_api_version", "applied_at", "node"),
    *("allocation", "created", "updated", "namespace_request", "owner"),
)
# Subqueries rather than joins: a page's COUNT(*) drops annotations it does not use, but not
# the joins they made (a count over four joined tables was 6x slower at 10,000 claims).
_NAMESPACE = NamespaceRequest.objects.filter(pk=OuterRef("namespace_request_id"))


def _username(user_field: str) -> Subquery:
    return Subquery(User.objects.filter(pk=OuterRef(user_field)).values("username"))


CLAIM_API_NAMES = {
    "row_cluster_id": Subquery(_NAMESPACE.values("cluster_id")),
    "row_cluster_name": Subquery(_NAMESPACE.values("cluster__name")),
    "row_namespace": Subquery(_NAMESPACE.values("name")),
    "row_owner": _username("owner_id"),
    "row_decided_by": _username("decided_by_id"),
}


def claim_request_api_rows(*, user: Any) -> QuerySet[ClaimRequest]:
    rows = ClaimRequest.objects.only(*CLAIM_API_FIELDS).annotate(**CLAIM_API_NAMES)
    return _visible(rows, user)


def verification_run_rows(*, user: Any) -> QuerySet[VerificationRun]:
    """verification_run_list for a table of rows: without the claim's and cluster's JSON."""
    claim = _without("claim", fields=CLAIM_JSON)
    cluster = _without("claim__namespace_request__cluster", fields=CLUSTER_JSON)
    return verification_run_list(user=user).defer("devices", *claim, *cluster)


def _runs_as_the_api_describes_them() -> QuerySet[VerificationRun]:
    claim = _without("claim", fields=CLAIM_JSON)
    cluster = _without("claim__namespace_request__cluster", fields=CLUSTER_JSON)
    described = RunLog.objects.defer("text").annotate(text_length=Length("text"))
    runs = _verification_runs().defer(*claim, *cluster)
    return runs.prefetch_related(Prefetch("logs", queryset=described))


def verification_run_api_rows(*, user: Any) -> QuerySet[VerificationRun]:
    """Runs as the API describes them: without the claim's and cluster's JSON, and their
    logs' lengths without the logs (a run long-polled or listed reads no log text)."""
    return _runs_visible(_runs_as_the_api_describes_them(), user)


def verification_run_api_get(*, user: Any, pk: int) -> VerificationRun:
    return _get_visible(_runs_as_the_api_describes_them(), pk, user, team_approvers_see=False)


def verification_run_log_get(*, user: Any, pk: int, container: str) -> tuple[Any, RunLog]:
    """A run and the log of one of its containers, in one query: only what the log's answer
    says of the run (whether it ended), none of its claim, namespace or cluster."""
    log = RunLog.objects.filter(run=OuterRef("pk"), container=container)
    runs = VerificationRun.objects.only("state", "owner_id").annotate(
        log_text=Subquery(log.values("text")), log_truncated=Subquery(log.values("truncated"))
    )
    run = _get_visible(runs, pk, user, team_approvers_see=False)
    text, truncated = run.log_text or "", bool(run.log_truncated)
    return run, RunLog(run=run, container=container, text=text, truncated=truncated)


def namespace_request_get(*, user: Any, pk: int) -> NamespaceRequest:
    return _get_visible(_namespace_requests(), pk, user, team_approvers_see=True)


def claim_request_get(*, user: Any, pk: int) -> ClaimRequest:
    return _get_visible(_claim_requests(), pk, user, team_approvers_see=True)


def verification_run_get(*, user: Any, pk: int) -> VerificationRun:
    runs = _verification_runs().prefetch_related("logs")
    return _get_visible(runs, pk, user, team_approvers_see=False)


def _get_visible(qs: QuerySet, pk: int, user: Any, *, team_approvers_see: bool) -> Any:
    """The object the user may see, else 404 (as for one that does not exist): as _visible
    (team_approvers_see) or _runs_visible says.

    Most reads are of one's own objects (every long-poll and log read of a script): those
    are answered from the object's owner, without asking for approver groups or teams."""
    try:
        obj = qs.get(pk=pk)
    except (qs.model.DoesNotExist, ValueError, TypeError):
        raise Http404 from None
    if (user.is_authenticated and obj.owner_id == user.pk) or user_is_approver(user):
        return obj
    scope = decider_scope(user) if team_approvers_see else None
    if scope is not None and qs.model.objects.filter(scope, pk=pk).exists():
        return obj
    raise Http404


def namespaces_for_claims(*, user: Any) -> QuerySet[NamespaceRequest]:
    """The namespaces a user may put a new claim in."""
    live = ("pending", "approved", "active")
    return NamespaceRequest.objects.filter(owner=user, state__in=live).select_related("cluster")


@dataclass(frozen=True)
class QueueFilter:
    """What an approver narrows the queue to; empty fields do not narrow."""

    kind: str = ""  # "namespace", "claim" or both
    cluster: int | None = None
    requester: str = ""
    device_class: str = ""

    def shows(self, kind: str) -> bool:
        # Namespaces have no device class: asking for one shows claims only.
        wanted = self.kind or ("claim" if self.device_class else "")
        return wanted in ("", kind)

    def namespaces(self) -> Q:
        found = Q()
        if self.cluster is not None:
            found &= Q(cluster_id=self.cluster)
        if self.requester:
            found &= Q(owner__username=self.requester)
        return found

    def claims(self) -> Q:
        found = Q()
        if self.cluster is not None:
            found &= Q(namespace_request__cluster_id=self.cluster)
        if self.requester:
            found &= Q(owner__username=self.requester)
        if self.device_class:
            found &= Q(device_class=self.device_class)
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


def approval_counts(*, user: Any, shown: QueueFilter | None = None) -> dict[str, int]:
    """Pending namespaces and claims, in all and as filtered: one query for the four."""
    scope = decider_scope(user)
    if scope is None:
        return {"namespaces": 0, "claims": 0, "namespaces_shown": 0, "claims_shown": 0}
    shown = shown or QueueFilter()
    parts = [
        _pending_counted(NamespaceRequest, "namespaces", shown.namespaces(), scope),
        _pending_counted(ClaimRequest, "claims", shown.claims(), scope),
    ]
    rows = parts[0].union(parts[1], all=True)
    counts: dict[str, int] = {}
    for kind, total, matching in rows.values_list("kind", "total", "matching"):
        counts[kind] = total
        counts[f"{kind}_shown"] = matching
    return counts


def _pending_counted(
    model: type[NamespaceRequest | ClaimRequest], kind: str, found: Q, scope: Q
) -> QuerySet:
    return (
        model.objects.filter(scope, state="pending")
        .annotate(kind=Value(kind))
        .values("kind")
        .annotate(total=Count("pk"), matching=Count("pk", filter=found))
        .order_by()
    )


def approval_count(user: Any) -> int:
    """How many requests wait for a decision (the number on the menu's Approvals link)."""
    counts = approval_counts(user=user)
    return counts["namespaces"] + counts["claims"]


GLANCE_SECONDS = changes.RECHECK_SECONDS


@dataclass(frozen=True)
class Glance:
    """What an idle dashboard poll reads: whether anything changed, and (for approvers) how
    many requests wait, for the menu."""

    fingerprint: str
    approvals_waiting: int | None


def dashboard_glance(*, user: Any) -> Glance:
    """Changes whenever a request or run the user may see is added, changed or removed.

    Kept per process for each version of the user's scope channel (claims.changes), so idle
    dashboards ask Redis, not the database; an announcement lost with Redis is made good
    after GLANCE_SECONDS, as a waiter's recheck is."""
    approver = user_is_approver(user)
    scope = changes.EVERYTHING if approver else changes.channel("user", user.pk)
    # Inside a transaction this request's own writes are not announced yet: ask the database.
    version = None if connection.in_atomic_block else changes.scope_version(scope)
    if version is None:
        return _glance(user, approver)
    key = f"portal:glance:{scope}:{version}"
    glance = cache.get(key)
    if glance is None:
        glance = _glance(user, approver)
        cache.set(key, glance, GLANCE_SECONDS)
    return glance


def _glance(user: Any, approver: bool) -> Glance:
    """One query of small aggregates over every row the user may see."""
    scope = Q() if approver else Q(owner=user)
    kinds = (("ns", NamespaceRequest), ("claim", ClaimRequest), ("run", VerificationRun))
    parts = [_glanced(model, kind, scope) for kind, model in kinds]
    columns = ("kind", "rows", "newest", "changed", "pending")
    union = parts[0].union(*parts[1:], all=True)
    rows = {row[0]: row[1:] for row in union.values_list(*columns)}
    seen = [rows[kind] for kind, _ in kinds]
    fingerprint = "|".join(f"{count}:{newest}:{changed}" for count, newest, changed, _ in seen)
    waiting = rows["ns"][3] + rows["claim"][3] if approver else None
    return Glance(hashlib.sha256(fingerprint.encode()).hexdigest()[:16], waiting)


def _glanced(model: type[Any], kind: str, scope: Q) -> QuerySet:
    return (
        model.objects.filter(scope)
        .annotate(kind=Value(kind))
        .values("kind")
        .annotate(
            rows=Count("pk"),
            newest=Max("pk"),
            changed=Max("updated"),
            pending=Count("pk", filter=Q(state="pending")),
        )
        .order_by()
    )


def dashboard_fingerprint(*, user: Any) -> str:
    return dashboard_glance(user=user).fingerprint


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
