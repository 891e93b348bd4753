"""Team quotas: how many devices a team's live claims ask for, and whether one more fits."""

from __future__ import annotations

from typing import Any

from django.db.models import Sum

from claims.models import ClaimRequest, Cluster, Team

# Claims that hold, or will hold, devices.
LIVE_CLAIM_STATES = ("pending", "approved", "applying", "waiting", "in_use")


def team_of(user: Any) -> Team | None:
    if not user.is_authenticated:
        return None
    return Team.objects.filter(members=user).order_by("pk").first()


def locked_team_of(user: Any) -> Team | None:
    """The user's team, its row locked until the transaction ends (call inside atomic)."""
    team = team_of(user)
    if team is None:
        return None
    return Team.objects.select_for_update().get(pk=team.pk)


def devices_asked(
    *, cluster: Cluster, device_class: str, count: int | None, all_devices: bool
) -> int:
    return cluster.device_count(device_class) if all_devices else int(count or 0)


def devices_held(team: Team) -> int:
    """Devices the team's live claims ask for ("all" claims counted at their class's size)."""
    live = ClaimRequest.objects.filter(owner__gpu_teams=team, state__in=LIVE_CLAIM_STATES)
    counted = live.filter(all_devices=False).aggregate(total=Sum("count"))["total"] or 0
    for claim in live.filter(all_devices=True).select_related("namespace_request__cluster"):
        counted += claim.namespace_request.cluster.device_count(claim.device_class)
    return counted


def quota_problem(team: Team | None, asked: int) -> str | None:
    if team is None or not team.gpu_quota:
        return None
    held = devices_held(team)
    if held + asked > team.gpu_quota:
        return (
            f"Team {team.name} may ask for {team.gpu_quota} device(s) in all; "
            f"{held} are already asked for, so at most {max(team.gpu_quota - held, 0)} more."
        )
    return None


def approves_itself(team: Team | None, asked: int) -> bool:
    """True when the team's admin chose auto-approval and the request fits the quota."""
    if team is None or not team.auto_approve:
        return False
    return team.gpu_quota == 0 or devices_held(team) + asked <= team.gpu_quota
