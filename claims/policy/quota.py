"""Team quotas per cluster and device class: what a team holds, and whether one more fits.

A request belongs to its owner's team; a user in several teams is charged to the team they
joined first. A user in no team has no quota (and no rule approves for them: an approver
decides). Checks against a limit run under the team's row lock (`team_to_charge`), so parallel
submits or approvals of one team are decided one after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils.translation import gettext as _

from claims.kube.manifests import ALL_DEVICES_QUOTA_CHARGE, device_class_quota_key
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamMembership, TeamQuota
from claims.models.teams import (
    first_team_id,
    first_team_members,
    first_teams_of_members,
    lifetime_words,
)
from claims.policy import quota_outside

# Claims that hold, or will hold, devices; DECIDED leaves out those still waiting for a yes.
LIVE_CLAIM_STATES = ("pending", "approved", "applying", "waiting", "in_use")
DECIDED_CLAIM_STATES = LIVE_CLAIM_STATES[1:]


def team_of(user: Any) -> Team | None:
    if not getattr(user, "is_authenticated", False):
        return None
    memberships = TeamMembership.objects.filter(user=user).select_related("team")
    first = memberships.order_by("joined", "id").first()
    return first.team if first else None


def team_to_charge(
    user: Any, cluster: Cluster, alternatives: Iterable[dict[str, Any]]
) -> Team | None:
    """The user's team, its row locked until the transaction ends (call inside atomic) when
    the team has a limit on a class the claim may be charged: parallel submits or approvals
    against that limit are then decided one after the other. Without a limit nothing is
    counted, and a team's parallel submits need not queue on its row."""
    team = team_of(user)
    if team is None:
        return None
    limits = TeamQuota.objects.filter(
        team=team,
        cluster=cluster,
        device_class__in=list(team_charges(cluster, alternatives)),
        max_devices__isnull=False,
    )
    if not limits.exists():
        return team
    return Team.objects.select_for_update().get(pk=team.pk)


def claim_team_to_charge(claim: ClaimRequest) -> Team | None:
    """team_to_charge for a claim made already (its approval, its retry)."""
    return team_to_charge(claim.owner, claim.cluster, claim.alternatives())


def quota_row(team: Team | None, cluster: Cluster, device_class: str) -> TeamQuota | None:
    if team is None:
        return None
    return TeamQuota.objects.filter(team=team, cluster=cluster, device_class=device_class).first()


def owner_quota_row(owner_id: int, cluster: Cluster, device_class: str) -> TeamQuota | None:
    """quota_row of the owner's (first) team, in one query."""
    rows = TeamQuota.objects.filter(cluster=cluster, device_class=device_class)
    return rows.filter(team_id=first_team_id(owner_id)).first()


def max_lifetime(team: Team | None, cluster: Cluster, device_class: str) -> timedelta | None:
    """The longest a claim of this team, cluster and class may live; None: no cap."""
    row = quota_row(team, cluster, device_class)
    return row.max_lifetime if row else None


def default_lifetime(team: Team | None, cluster: Cluster, device_class: str) -> timedelta | None:
    """The team's default lifetime for such a claim, capped by its max lifetime (the max
    when it sets no default); None when it sets neither."""
    return default_lifetime_of(quota_row(team, cluster, device_class))


def default_lifetime_of(row: TeamQuota | None) -> timedelta | None:
    if row is None or row.default_lifetime is None:
        return row.max_lifetime if row else None
    return min(row.default_lifetime, row.max_lifetime or row.default_lifetime)


def charges(
    alternatives: Iterable[dict[str, Any]], all_charge: Callable[[str], int]
) -> dict[str, int]:
    """What a claim charges each device class: its largest alternative of that class, as the
    API server's quota evaluator charges a prioritized list (the worst case, whichever the
    scheduler takes); `all_charge` says what an "all devices" alternative of a class counts."""
    charged: dict[str, int] = {}
    for alt in alternatives:
        device_class = alt["device_class"]
        devices = all_charge(device_class) if alt.get("all_devices") else int(alt.get("count") or 0)
        charged[device_class] = max(charged.get(device_class, 0), devices)
    return charged


def team_charges(cluster: Cluster, alternatives: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The team quota's charges: an "all devices" alternative holds its class's every device."""
    return charges(alternatives, cluster.device_count)


def namespace_charges(alternatives: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The namespace ResourceQuota's charges: "all devices" counts the most one claim can get."""
    return charges(alternatives, lambda device_class: ALL_DEVICES_QUOTA_CHARGE)


def row_alternatives(
    device_class: str, count: int | None, all_devices: bool, further: list | None
) -> list[dict[str, Any]]:
    """A claim's alternatives from its columns (ClaimRequest.alternatives without the row)."""
    first = {"device_class": device_class, "count": count, "all_devices": all_devices}
    return [first, *(further or [])]


def devices_of(claim: ClaimRequest) -> int:
    """The most devices the claim can get: its largest alternative."""
    return max(team_charges(claim.cluster, claim.alternatives()).values(), default=0)


def class_devices_of(claim: ClaimRequest, device_class: str) -> int:
    return team_charges(claim.cluster, claim.alternatives()).get(device_class, 0)


def charged_users(team: Team) -> list[int]:
    """Members whose first team is this one: their claims count here."""
    return first_team_members([team.pk])


CHARGE_COLUMNS = ("device_class", "count", "all_devices", "further_alternatives")


def devices_held(team: Team, cluster: Cluster, device_class: str, *, decided: bool = False) -> int:
    """Devices the team's live claims of the class ask for on the cluster ("all" claims at
    their class's size, a claim with alternatives at its largest of the class); `decided`:
    only those an approver (or a rule) said yes to."""
    states = DECIDED_CLAIM_STATES if decided else LIVE_CLAIM_STATES
    members = charged_users(team)
    # A few columns per claim: a team may hold hundreds, and each is on this cluster. Every
    # class is read: an alternative may be of this class when the claim's first is not.
    claims = ClaimRequest.objects.filter(
        owner_id__in=members, namespace_request__cluster=cluster, state__in=states
    )
    rows = claims.values_list(*CHARGE_COLUMNS)
    asked = sum(team_charges(cluster, row_alternatives(*row)).get(device_class, 0) for row in rows)
    return asked + quota_outside.held_outside(cluster, members, device_class)


@dataclass(frozen=True)
class Use:
    """A team's use of one class on one cluster, before and after a request."""

    team: Team
    cluster: Cluster
    device_class: str
    held: int
    asked: int
    limit: int | None

    @property
    def after(self) -> int:
        return self.held + self.asked

    @property
    def fits(self) -> bool:
        return self.limit is None or self.after <= self.limit

    def problem(self) -> str:
        room = max((self.limit or 0) - self.held, 0)
        message = _(
            "Team %(team)s may hold %(limit)s %(device_class)s device(s) on %(cluster)s; "
            "%(held)s are already held or asked for, so at most %(room)s more."
        )
        return message % {
            "team": self.team.name,
            "limit": self.limit,
            "device_class": self.device_class,
            "cluster": self.cluster.name,
            "held": self.held,
            "room": room,
        }


def team_use(
    team: Team, cluster: Cluster, device_class: str, *, asked: int, decided: bool = False
) -> Use:
    limit = _limit(team, cluster, device_class)
    return _use(team, cluster, device_class, asked=asked, decided=decided, limit=limit)


def _use(
    team: Team, cluster: Cluster, device_class: str, *, asked: int, decided: bool, limit: int | None
) -> Use:
    held = devices_held(team, cluster, device_class, decided=decided)
    return Use(team, cluster, device_class, held, asked, limit)


def with_team_use(claims: list[ClaimRequest]) -> list[ClaimRequest]:
    """A page of claims, each pending one with `team_use` (its approval_use, or None for an
    owner in no team), in a few queries whatever the page's size; for the approval queue,
    whose claims come with their clusters (approval_queue.with_clusters)."""
    pending = [claim for claim in claims if claim.state == ClaimRequest.State.PENDING]
    teams = _first_teams_of(pending)
    charged = first_teams_of_members({team.pk for team in teams.values()})
    rows = TeamQuota.objects.filter(team_id__in=set(charged.values()))
    limits = {(q.team_id, q.cluster_id, q.device_class): q.max_devices for q in rows}
    held = _decided_devices(charged, {claim.cluster.pk: claim.cluster for claim in pending})
    for claim in pending:
        team = teams.get(claim.owner_id)
        claim.team_use = _page_use(team, claim, held, limits) if team else None  # type: ignore[attr-defined]
    return claims


def _page_use(team: Team, claim: ClaimRequest, held: dict, limits: dict) -> Use:
    key = (team.pk, claim.cluster.pk, claim.device_class)
    cluster, asked = claim.cluster, class_devices_of(claim, claim.device_class)
    return Use(team, cluster, claim.device_class, held.get(key, 0), asked, limits.get(key))


def _first_teams_of(claims: list[ClaimRequest]) -> dict[int, Team]:
    """Each owner's first team: from the rows' owner_team_id (approval_queue.approval_queue reads
    it with the page, so a queue without teams asks nothing more), else looked up."""
    if not all(hasattr(claim, "owner_team_id") for claim in claims):
        return _first_teams({claim.owner_id for claim in claims})
    team_ids = {claim.owner_team_id for claim in claims}  # type: ignore[attr-defined]
    by_id = {team.pk: team for team in Team.objects.filter(pk__in=team_ids - {None})}
    return {c.owner_id: by_id[c.owner_team_id] for c in claims if c.owner_team_id in by_id}  # type: ignore[attr-defined]


def _first_teams(user_ids: set[int]) -> dict[int, Team]:
    rows = TeamMembership.objects.filter(user_id__in=user_ids).select_related("team")
    firsts: dict[int, Team] = {}
    for membership in rows.order_by("joined", "id"):
        firsts.setdefault(membership.user_id, membership.team)
    return firsts


def _decided_devices(charged: dict[int, int], clusters: dict[int, Cluster]) -> dict[tuple, int]:
    """Devices the decided live claims of the charged users hold, by (team, cluster, class)."""
    claims = ClaimRequest.objects.filter(owner_id__in=charged, state__in=DECIDED_CLAIM_STATES)
    rows = list(claims.values_list("owner_id", "namespace_request__cluster_id", *CHARGE_COLUMNS))
    missing = {row[1] for row in rows if row[1] not in clusters}
    clusters = clusters | {c.pk: c for c in Cluster.objects.filter(pk__in=missing)}
    held: dict[tuple, int] = {}
    for owner_id, cluster_id, *columns in rows:
        for device_class, devices in team_charges(
            clusters[cluster_id], row_alternatives(*columns)
        ).items():
            key = (charged[owner_id], cluster_id, device_class)
            held[key] = held.get(key, 0) + devices
    return _with_held_outside(held, charged, clusters)


def _with_held_outside(
    held: dict[tuple, int], charged: dict[int, int], clusters: dict[int, Cluster]
) -> dict[tuple, int]:
    """What each team's namespaces hold outside the portal (quota_outside), added in: a query
    per cluster, not per team and cluster."""
    members: dict[int, list[int]] = {}
    for user_id, team_id in charged.items():
        members.setdefault(team_id, []).append(user_id)
    classes = {device_class for _, _, device_class in held}
    for cluster in clusters.values():
        classes |= {dc["name"] for dc in (cluster.inventory or {}).get("device_classes", [])}
        outside = quota_outside.held_outside_by_group(cluster, members, classes)
        for (team, device_class), devices in outside.items():
            key = (team, cluster.pk, device_class)
            held[key] = held.get(key, 0) + devices
    return held


def submit_problem(
    team: Team | None, *, namespace_request: NamespaceRequest, alternatives: list[dict[str, Any]]
) -> str | None:
    """Why a new claim does not fit the team's quota (pending claims count), else None. Each
    class is charged the claim's largest alternative of it."""
    return _charge_problem(team, namespace_request, alternatives, LIVE_CLAIM_STATES)


def approval_problem(team: Team | None, claim: ClaimRequest) -> str | None:
    """Why approving the claim now would go over its team's quota, else None: claims decided
    since (or a quota lowered since) count, other pending ones do not."""
    ns, alternatives = claim.namespace_request, claim.alternatives()
    return _charge_problem(team, ns, alternatives, DECIDED_CLAIM_STATES)


def _charge_problem(
    team: Team | None, ns: NamespaceRequest, alternatives: list[dict[str, Any]], states: tuple
) -> str | None:
    cluster = ns.cluster
    if team is None:
        return None
    in_namespace = namespace_charges(alternatives)
    for device_class, asked in team_charges(cluster, alternatives).items():
        limit = _limit(team, cluster, device_class)
        if limit is None:
            continue
        decided = states == DECIDED_CLAIM_STATES
        use = _use(team, cluster, device_class, asked=asked, decided=decided, limit=limit)
        if not use.fits:
            return use.problem()
        charge = in_namespace[device_class]
        if problem := _namespace_charge_problem(use, ns, charge, states):
            return problem
    return None


def _limit(team: Team | None, cluster: Cluster, device_class: str) -> int | None:
    """The team's device limit for the class there; None: nothing is over it, and its claims
    need not be counted."""
    row = quota_row(team, cluster, device_class)
    return row.max_devices if row else None


def approval_use(team: Team, claim: ClaimRequest) -> Use:
    """The team's use of the claim's class before and after approving it."""
    limit = _limit(team, claim.cluster, claim.device_class)
    asked = class_devices_of(claim, claim.device_class)
    return _use(team, claim.cluster, claim.device_class, asked=asked, decided=True, limit=limit)


def _namespace_charge_problem(
    use: Use, ns: NamespaceRequest, charge: int, states: tuple
) -> str | None:
    """The namespace's ResourceQuota charges an "all devices" claim the most one claim can
    get (32, as the API server's quota evaluator does), not the class's size: refuse here
    what the cluster would refuse after approval."""
    if use.limit is None:
        return None
    rows = ns.claim_requests.filter(state__in=states).values_list(*CHARGE_COLUMNS)
    charged = sum(
        namespace_charges(row_alternatives(*row)).get(use.device_class, 0) for row in rows
    )
    if charged + charge <= use.limit:
        return None
    message = _(
        "The cluster's quota on namespace %(namespace)s counts an 'all devices' claim as "
        "%(charge)s %(device_class)s devices, over team %(team)s's %(limit)s: ask for an "
        "exact number of devices."
    )
    return message % {
        "namespace": ns.name,
        "charge": ALL_DEVICES_QUOTA_CHARGE,
        "device_class": use.device_class,
        "team": use.team.name,
        "limit": use.limit,
    }


def namespace_quota_hard(team: Team | None, cluster: Cluster) -> dict[str, str]:
    """The `spec.hard` of a team's namespaces on a cluster: one entry per limited class."""
    if team is None:
        return {}
    rows = TeamQuota.objects.filter(team=team, cluster=cluster, max_devices__isnull=False)
    return {device_class_quota_key(row.device_class): str(row.max_devices) for row in rows}


@dataclass(frozen=True)
class QuotaLine:
    """One of a team's quotas and what the team holds of it now."""

    quota: TeamQuota
    held: int

    @property
    def max_lifetime(self) -> str:
        return lifetime_words(self.quota.max_lifetime) or _("no cap")

    @property
    def default_lifetime(self) -> str:
        return lifetime_words(self.quota.default_lifetime) or "—"


def quota_lines(team: Team) -> list[QuotaLine]:
    return [
        QuotaLine(row, devices_held(team, row.cluster, row.device_class))
        for row in team.quotas.all()
    ]
