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

from claims.live import changes
from claims.models import (
    AUDIT_KINDS,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    RunLog,
    Team,
    VerificationRun,
    Workload,
    WorkloadLog,
    WorkloadProfile,
)
from claims.models.teams import approved_team_ids, first_team_members
from claims.read import keyset

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
    approvers; claims.policy.rules enforces the same), or none (None)."""
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


def decided_teams(*, user: Any) -> QuerySet[Team]:
    """The teams whose requests the user decides: every one for staff approvers, the ones
    they are a team approver of, or none."""
    if user_is_approver(user):
        return Team.objects.all()
    return Team.objects.filter(pk__in=approved_team_ids(user))


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
    "further_alternatives",
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


def claims_in_namespace(
    *, namespace_request: NamespaceRequest, size: int, before: keyset.Position | None = None
) -> keyset.NewestFirst:
    """A page of the claims of a namespace the user may see already, newest first, without
    their JSON: the newest, or those just older than `before`."""
    claims = namespace_request.claim_requests.defer(*CLAIM_JSON)
    return keyset.newest_first(claims, size=size, before=before)


def claim_request_api_rows(*, user: Any) -> QuerySet[ClaimRequest]:
    rows = ClaimRequest.objects.only(*CLAIM_API_FIELDS).annotate(**CLAIM_API_NAMES)
    return _visible(rows, user)


def verification_run_rows(*, user: Any) -> QuerySet[VerificationRun]:
    """verification_run_list for a table of rows: without the claim's and cluster's JSON (with
    the run's devices: the dashboard says how many GPUs of which model each run got)."""
    claim = _without("claim", fields=CLAIM_JSON)
    cluster = _without("claim__namespace_request__cluster", fields=CLUSTER_JSON)
    return verification_run_list(user=user).defer(*claim, *cluster)


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
    says of the run (whether it ended, why its logs could not be read), none of its claim,
    namespace or cluster."""
    log = RunLog.objects.filter(run=OuterRef("pk"), container=container)
    runs = VerificationRun.objects.only("state", "owner_id", "log_error").annotate(
        log_text=Subquery(log.values("text")), log_truncated=Subquery(log.values("truncated"))
    )
    run = _get_visible(runs, pk, user, team_approvers_see=False)
    text, truncated = run.log_text or "", bool(run.log_truncated)
    return run, RunLog(run=run, container=container, text=text, truncated=truncated)


def _workloads() -> QuerySet[Workload]:
    claim = _without("claim", fields=CLAIM_JSON)
    cluster = _without("claim__namespace_request__cluster", fields=CLUSTER_JSON)
    rows = Workload.objects.select_related("claim__namespace_request__cluster", "owner")
    return rows.defer(*claim, *cluster)


def workload_list(*, user: Any) -> QuerySet[Workload]:
    """Workloads: every one for staff approvers, else one's own (as runs)."""
    return _runs_visible(_workloads(), user)


def workload_get(*, user: Any, pk: int) -> Workload:
    return _get_visible(_workloads(), pk, user, team_approvers_see=False)


def workload_log_get(*, user: Any, pk: int) -> tuple[Workload, WorkloadLog]:
    """A workload and its log (an empty one before any line was read)."""
    workload = workload_get(user=user, pk=pk)
    log = WorkloadLog.objects.filter(workload=workload).first()
    return workload, log or WorkloadLog(workload=workload)


def workload_profile_list(*, user: Any) -> QuerySet[WorkloadProfile]:
    """The profiles offered; staff see the ones no longer offered too."""
    profiles = WorkloadProfile.objects.all()
    return profiles if user.is_staff else profiles.filter(active=True)


def namespace_request_get(*, user: Any, pk: int) -> NamespaceRequest:
    return _get_visible(_namespace_requests(), pk, user, team_approvers_see=True)


def claim_request_get(*, user: Any, pk: int) -> ClaimRequest:
    return _get_visible(_claim_requests(), pk, user, team_approvers_see=True)


def runs_with_unread_logs(claim: ClaimRequest) -> list[VerificationRun]:
    """The claim's ended runs whose logs the cluster would not give yet and are still asked
    for: their Pods hold the logs, and deleting them (a release) loses them for good."""
    runs = claim.runs.filter(state__in=VerificationRun.FINAL_STATES, log_retry_until__isnull=False)
    return list(runs.exclude(log_error="").order_by("created"))


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


# How long a glance is kept for one scope version: an announcement lost with Redis is made
# good this late.
GLANCE_SECONDS = 5.0


@dataclass(frozen=True)
class Glance:
    """What an idle dashboard poll reads: whether anything changed, and (for approvers) how
    many requests wait, for the menu."""

    fingerprint: str
    approvals_waiting: int | None


def dashboard_glance(*, user: Any) -> Glance:
    """Changes whenever a request or run the user may see is added, changed or removed.

    Kept per process for each version of the user's scope channel (claims.live.changes), so idle
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


def events_for(
    obj: NamespaceRequest | ClaimRequest | VerificationRun | Workload,
) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(
        object_kind=AUDIT_KINDS[type(obj)], object_id=obj.pk
    ).select_related("actor")


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
