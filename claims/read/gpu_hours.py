"""GPU-hours per team and user for a month: held (a claim's devices from its allocation, its
first `in use`, to its leaving the cluster: released, failed) and busy (the devices' activity
summed over the same month, from Prometheus; "no data", with why, without it).

Held hours come from the audit trail (the state changes and the allocation each recorded);
busy hours from one PromQL query for the month (docs/operations.md, Utilisation):

    sum by (dra_claim_namespace, dra_claim_name) (sum_over_time(
        (max by (UUID, dra_claim_namespace, dra_claim_name)
            (DCGM_FI_PROF_GR_ENGINE_ACTIVE{dra_claim_name!=""}
             or DCGM_FI_PROF_SM_ACTIVE{dra_claim_name!=""}))[<month>s:<resolution>s]))
        * <resolution> / 3600

A busy hour is an hour of one GPU fully busy: 0.5 activity for two hours is one busy hour.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from claims.kube import gpu_metrics
from claims.kube.gpu_metrics import NoMetrics
from claims.models import AuditEvent, ClaimRequest, TeamMembership
from claims.models.teams import first_teams_of_members
from claims.read import metrics_scope
from claims.read.selectors import user_is_approver

HOLDING = ("in_use", "waiting")  # between these a claim keeps its devices allocated
BUSY_RESOLUTION_SECONDS = 60


@dataclass
class Line:
    team: str
    user: str
    claims: int = 0
    held_hours: float = 0.0
    busy_hours: float | None = None  # None: no data

    @property
    def busy_share(self) -> float | None:
        if self.busy_hours is None or not self.held_hours:
            return None
        return self.busy_hours / self.held_hours


@dataclass
class Report:
    month: str  # YYYY-MM
    start: datetime
    end: datetime  # the month's end, or now for the month that runs
    users: list[Line] = field(default_factory=list)
    teams: list[Line] = field(default_factory=list)
    no_data: str = ""  # why there are no busy hours


def month_bounds(month: str | None, now: datetime | None = None) -> tuple[str, datetime, datetime]:
    """("2026-03", its first moment, the next month's) in UTC; ValueError for a bad month."""
    now = now or timezone.now()
    if not month:
        month = now.astimezone(UTC).strftime("%Y-%m")
    start = datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
    following = start.replace(year=start.year + 1, month=1) if start.month == 12 else None
    end = following or start.replace(month=start.month + 1)
    return start.strftime("%Y-%m"), start, end


def visible_owner_ids(user: Any) -> list[int] | None:
    """None: every owner (approvers and staff); else the members of the user's teams."""
    if user_is_approver(user):
        return None
    teams = TeamMembership.objects.filter(user=user).values("team_id")
    return list(TeamMembership.objects.filter(team_id__in=teams).values_list("user_id", flat=True))


def gpu_hours(
    user: Any,
    month: str | None = None,
    *,
    now: datetime | None = None,
    resolution: float = BUSY_RESOLUTION_SECONDS,
) -> Report:
    now = now or timezone.now()
    name, start, month_end = month_bounds(month, now)
    end = min(month_end, now)
    report = Report(month=name, start=start, end=end)
    if end <= start:
        return report
    claims = ClaimRequest.objects.select_related("owner", "namespace_request")
    owners = visible_owner_ids(user)
    if owners is not None:
        claims = claims.filter(owner_id__in=owners)
    allocated = AuditEvent.objects.filter(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST,
        action=AuditEvent.Action.STATE_CHANGE,
        to_state="in_use",
        created__lt=end,
    ).values("object_id")
    held = _held(
        list(claims.filter(pk__in=allocated).select_related("namespace_request__cluster")),
        start,
        end,
    )
    clusters = {c.namespace_request.cluster_id: c.namespace_request.cluster for c, _h in held}
    busy, report.no_data = _busy(clusters, start, end, resolution)
    lines: dict[tuple[str, str], Line] = {}
    team_names = _team_names({claim.owner_id for claim, _ in held})
    for claim, hours in held:
        team = team_names.get(claim.owner_id, "")
        line = lines.setdefault(
            (team, claim.owner.get_username()), Line(team, claim.owner.get_username())
        )
        line.claims += 1
        line.held_hours += hours
        if busy is not None:
            ns = claim.namespace_request
            key = (ns.cluster_id, ns.name, claim.name)
            line.busy_hours = (line.busy_hours or 0.0) + busy.get(key, 0.0)
    report.users = sorted(lines.values(), key=lambda line: (line.team, line.user))
    report.teams = _by_team(report.users, busy is not None)
    return report


def _held(
    claims: list[ClaimRequest], start: datetime, end: datetime
) -> list[tuple[ClaimRequest, float]]:
    """Each claim's device-hours within [start, end) from its state changes."""
    events: dict[int, list[AuditEvent]] = {}
    rows = AuditEvent.objects.filter(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST,
        object_id__in=[claim.pk for claim in claims],
        action=AuditEvent.Action.STATE_CHANGE,
    ).order_by("created", "id")
    for event in rows:
        events.setdefault(int(event.object_id or 0), []).append(event)
    held = []
    for claim in claims:
        hours = 0.0
        since: datetime | None = None
        devices = 0
        for event in events.get(claim.pk, []):
            if since is None and event.to_state == "in_use":
                since, devices = event.created, _devices(event.allocation, claim)
            elif since is not None and event.to_state not in HOLDING:
                hours += _overlap(since, event.created, start, end) * devices
                since = None
        if since is not None:
            hours += _overlap(since, end, start, end) * devices
        if hours:
            held.append((claim, hours))
    return held


def _devices(allocation: Any, claim: ClaimRequest) -> int:
    if isinstance(allocation, dict) and allocation.get("devices"):
        return len(allocation["devices"])
    return claim.count or 1


def _overlap(since: datetime, until: datetime, start: datetime, end: datetime) -> float:
    seconds = (min(until, end) - max(since, start)).total_seconds()
    return max(seconds, 0.0) / 3600


def _busy(
    clusters: dict[int, Any], start: datetime, end: datetime, resolution: float
) -> tuple[dict[tuple[int, str, str], float] | None, str]:
    """(cluster id, namespace, claim name) -> busy hours, each cluster's from its own
    Prometheus and series (claims/read/metrics_scope.py); None with why when any is missing."""
    scopes = {pk: metrics_scope.scope_of(cluster) for pk, cluster in clusters.items()}
    if not any(scope.url for scope in scopes.values()) and not settings.PROMETHEUS_URL:
        return None, _("busy hours need Prometheus (PROMETHEUS_URL is not set)")
    found: dict[tuple[int, str, str], float] = {}
    for pk, scope in scopes.items():
        if not scope.url:
            why = _("busy hours need Prometheus (cluster %(name)s has none)")
            return None, why % {"name": clusters[pk].name}
        prometheus = gpu_metrics.Prometheus(scope.url, settings.UTILISATION_TIMEOUT)
        query = busy_query(end - start, resolution, scope.matchers)
        try:
            samples = prometheus.instant(query, at=end.timestamp())
        except NoMetrics as error:
            return None, _(error.message) % error.params
        for sample in samples:
            labels = sample.labels
            key = (pk, labels.get("dra_claim_namespace", ""), labels.get("dra_claim_name", ""))
            found[key] = sample.value
    return found, ""


def busy_query(span: Any, resolution: float, matchers: str = "") -> str:
    claim = "UUID, dra_claim_namespace, dra_claim_name"
    selector = ",".join(part for part in ('dra_claim_name!=""', matchers) if part)
    return (
        "sum by (dra_claim_namespace, dra_claim_name) (sum_over_time("
        f"(max by ({claim}) ({gpu_metrics.activity(selector)}))"
        f"[{int(span.total_seconds())}s:{resolution:g}s])) * {resolution:g} / 3600"
    )


def _team_names(owner_ids: set[int]) -> dict[int, str]:
    """Each owner's first team (the one their quota is charged to)."""
    memberships = TeamMembership.objects.filter(user_id__in=owner_ids).select_related("team")
    team_ids = list({m.team_id for m in memberships})
    firsts = first_teams_of_members(team_ids)
    names = {m.team_id: m.team.name for m in memberships}
    return {user_id: names[team_id] for user_id, team_id in firsts.items()}


def _by_team(users: list[Line], has_busy: bool) -> list[Line]:
    teams: dict[str, Line] = {}
    for line in users:
        total = teams.setdefault(
            line.team, Line(line.team, "", busy_hours=0.0 if has_busy else None)
        )
        total.claims += line.claims
        total.held_hours += line.held_hours
        if has_busy:
            total.busy_hours = (total.busy_hours or 0.0) + (line.busy_hours or 0.0)
    return list(teams.values())


def as_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["month", "team", "user", "claims", "held_gpu_hours", "busy_gpu_hours"])
    for line in report.users:
        busy = "" if line.busy_hours is None else f"{line.busy_hours:.3f}"
        row = [report.month, line.team, line.user, line.claims, f"{line.held_hours:.3f}", busy]
        writer.writerow(row)
    return out.getvalue()
