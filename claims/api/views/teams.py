"""Teams, their members and quotas (with what each team holds now): members read their teams,
approvers and staff every team (as on the Teams page); admins change them, through
claims.domain.teams like the admin's edits, so live namespaces get the new quotas."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import call_service
from claims.api.serializers.teams import (
    MemberOutput,
    QuotaOutput,
    TeamDetailOutput,
    TeamOutput,
)
from claims.api.views.base import ApiView
from claims.domain import teams
from claims.models import ApprovalRule, Cluster, Team, TeamMembership, TeamQuota
from claims.policy import idle_policy, quota
from claims.read import selectors

TAG = ["teams"]


def require_admin(request: Request, permission: str) -> None:
    """Staff with the model permission, as the Django admin asks of whoever edits there."""
    user = request.user
    if not (user.is_staff and user.has_perm(f"claims.{permission}")):
        raise PermissionDenied(gettext("Only an admin changes teams, quotas and approval rules."))


def lifetimes(data: dict[str, Any]) -> dict[str, Any]:
    """The inputs' *_seconds as the rows' durations."""
    fields = {}
    for name, value in data.items():
        if name.endswith("_seconds"):
            name, value = name.removesuffix("_seconds"), _duration(value)
        fields[name] = value
    return fields


def _duration(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def lifetime_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=60,
        max_value=10 * 365 * 86400,
        allow_null=True,
        required=False,
        help_text=help_text,
    )


class TeamInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    auto_approve = serializers.BooleanField(default=False)
    idle_reclaim = serializers.BooleanField(
        required=False, help_text="Warn the owners of idle claims and release them after the grace."
    )
    idle_threshold = serializers.FloatField(
        min_value=idle_policy.THRESHOLD_MIN,
        max_value=idle_policy.THRESHOLD_MAX,
        required=False,
        help_text="GPU activity (0-1) at or below which a claim is idle.",
    )
    idle_window_seconds = serializers.IntegerField(
        min_value=int(idle_policy.WINDOW_MIN.total_seconds()),
        max_value=int(idle_policy.LONGEST.total_seconds()),
        required=False,
        help_text="How long a claim stays idle before its owner is warned.",
    )
    idle_grace_seconds = serializers.IntegerField(
        min_value=int(idle_policy.GRACE_MIN.total_seconds()),
        max_value=int(idle_policy.LONGEST.total_seconds()),
        required=False,
        help_text="From the warning to the release, unless used again or extended.",
    )
    kueue_local_queue = serializers.CharField(
        max_length=63,
        allow_blank=True,
        required=False,
        help_text="On clusters that run Kueue: the LocalQueue its jobs go to; empty: the "
        "portal's default (KUEUE_LOCAL_QUEUE).",
    )


class MemberInput(serializers.Serializer):
    user = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), help_text="A username."
    )
    role = serializers.ChoiceField(TeamMembership.Role.choices, default=TeamMembership.Role.MEMBER)


class RoleInput(serializers.Serializer):
    role = serializers.ChoiceField(TeamMembership.Role.choices)


class QuotaInput(serializers.Serializer):
    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    device_class = serializers.CharField(max_length=253)
    max_devices = serializers.IntegerField(
        min_value=0, allow_null=True, required=False, help_text="null or left out: no limit."
    )
    max_lifetime_seconds = lifetime_field("Longest a claim may live; null: no cap.")
    default_lifetime_seconds = lifetime_field("A claim's lifetime unless it asks for another.")


TEAM_INPUT = OpenApiExample("A team", value={"name": "vision", "auto_approve": False})
IDLE_POLICY = OpenApiExample(
    "Release claims idle for 4 h, a day after the warning",
    value={
        "idle_reclaim": True,
        "idle_threshold": 0.05,
        "idle_window_seconds": 14400,
        "idle_grace_seconds": 86400,
    },
)
MEMBER_INPUT = OpenApiExample("A member", value={"user": "alice", "role": "member"})
QUOTA_INPUT = OpenApiExample(
    "Four GPUs for a week at most",
    value={
        "cluster": 1,
        "device_class": "gpu.nvidia.com",
        "max_devices": 4,
        "max_lifetime_seconds": 604800,
    },
)


def valid(serializer_class: type[serializers.Serializer], request: Request, **kwargs: Any) -> dict:
    serializer = serializer_class(data=request.data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def detail_of(team: Team, user: Any) -> dict[str, Any]:
    """What GET /teams/{id}/ answers: members, quotas with use, the rules that may apply."""
    rules = ApprovalRule.objects.filter(Q(team=None) | Q(team=team), enabled=True)
    context = {
        "user": user,
        "quota_lines": quota.quota_lines(team),
        "rules": rules.select_related("team", "cluster"),
    }
    return TeamDetailOutput(team, context=context).data


def quota_line(row: TeamQuota) -> dict[str, Any]:
    held = quota.devices_held(row.team, row.cluster, row.device_class)
    return QuotaOutput(quota.QuotaLine(row, held)).data


class TeamListApi(ApiView):
    model = Team
    list_selector = staticmethod(selectors.team_list)
    filter_backends: list[Any] = [*ApiView.filter_backends[1:]]
    ordering_fields = ["name", "id"]

    @extend_schema(tags=TAG, responses=TeamOutput(many=True), summary="List teams")
    def get(self, request: Request) -> Response:
        """Your teams; approvers and staff every team. `role` is yours in each."""
        return self.list_response(TeamOutput, prepare=lambda page: {"user": request.user})

    @extend_schema(
        tags=TAG,
        request=TeamInput,
        responses={201: TeamDetailOutput},
        examples=[TEAM_INPUT],
        summary="Create a team (admins)",
    )
    def post(self, request: Request) -> Response:
        require_admin(request, "add_team")
        team = call_service(teams.team_create, **lifetimes(valid(TeamInput, request)))
        return Response(detail_of(team, request.user), status=201)


class OneTeamApi(ApiView):
    filter_backends: list[Any] = []
    pagination_class = None

    def team(self, pk: int) -> Team:
        """404 for a team the user may not see, before any 403."""
        return get_object_or_404(selectors.team_list(user=self.request.user), pk=pk)


class TeamDetailApi(OneTeamApi):
    @extend_schema(tags=TAG, responses=TeamDetailOutput, summary="Get a team")
    def get(self, request: Request, pk: int) -> Response:
        """Members, quotas per cluster and device class with what the team holds of each now
        (`held`, `room`), and the enabled approval rules that may approve its requests."""
        return Response(detail_of(self.team(pk), request.user))

    @extend_schema(
        tags=TAG,
        request=TeamInput(partial=True),
        responses=TeamDetailOutput,
        examples=[OpenApiExample("Auto-approve", value={"auto_approve": True}), IDLE_POLICY],
        summary="Change a team (admins)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        team = self.team(pk)
        require_admin(request, "change_team")
        fields = lifetimes(valid(TeamInput, request, partial=True))
        call_service(teams.team_update, team=team, **fields)
        return Response(detail_of(self.team(pk), request.user))

    @extend_schema(
        tags=TAG, request=None, responses={200: TeamDetailOutput}, summary="Delete a team"
    )
    def delete(self, request: Request, pk: int) -> Response:
        """Admins; 409 while the team has members. Answers what it was."""
        team = self.team(pk)
        require_admin(request, "delete_team")
        removed = detail_of(team, request.user)
        call_service(teams.team_delete, team=team)
        return Response(removed)


class MemberListApi(OneTeamApi):
    @extend_schema(
        tags=TAG,
        request=MemberInput,
        responses={201: MemberOutput},
        examples=[MEMBER_INPUT],
        summary="Add a member to a team (admins)",
    )
    def post(self, request: Request, pk: int) -> Response:
        """A user's first team is the one their claims are charged to: their live
        namespaces get its quotas."""
        team = self.team(pk)
        require_admin(request, "change_team")
        membership = call_service(teams.team_member_add, team=team, **valid(MemberInput, request))
        return Response(MemberOutput(membership).data, status=201)


class MemberDetailApi(OneTeamApi):
    def membership(self, request: Request, pk: int, member_id: int) -> TeamMembership:
        team = self.team(pk)
        require_admin(request, "change_team")
        return get_object_or_404(team.memberships.select_related("user"), pk=member_id)

    @extend_schema(
        tags=TAG,
        request=RoleInput,
        responses=MemberOutput,
        examples=[OpenApiExample("A team approver", value={"role": "approver"})],
        summary="Change a member's role (admins)",
    )
    def patch(self, request: Request, pk: int, member_id: int) -> Response:
        membership = self.membership(request, pk, member_id)
        call_service(teams.team_member_update, membership=membership, **valid(RoleInput, request))
        return Response(MemberOutput(membership).data)

    @extend_schema(tags=TAG, request=None, responses={200: MemberOutput}, summary="Remove a member")
    def delete(self, request: Request, pk: int, member_id: int) -> Response:
        """Admins. Answers the membership that was."""
        membership = self.membership(request, pk, member_id)
        removed = MemberOutput(membership).data
        call_service(teams.team_member_remove, membership=membership)
        return Response(removed)


class QuotaListApi(OneTeamApi):
    @extend_schema(
        tags=TAG,
        request=QuotaInput,
        responses={201: QuotaOutput},
        examples=[QUOTA_INPUT],
        summary="Add a quota to a team (admins)",
    )
    def post(self, request: Request, pk: int) -> Response:
        """One per cluster and device class; the team's live namespaces get it on their
        ResourceQuota."""
        team = self.team(pk)
        require_admin(request, "change_team")
        fields = lifetimes(valid(QuotaInput, request))
        row = call_service(teams.team_quota_create, team=team, **fields)
        return Response(quota_line(row), status=201)


class QuotaDetailApi(OneTeamApi):
    def quota(self, request: Request, pk: int, quota_id: int) -> TeamQuota:
        team = self.team(pk)
        require_admin(request, "change_team")
        return get_object_or_404(team.quotas.select_related("team", "cluster"), pk=quota_id)

    @extend_schema(
        tags=TAG,
        request=QuotaInput(partial=True),
        responses=QuotaOutput,
        examples=[OpenApiExample("Six GPUs", value={"max_devices": 6})],
        summary="Change a quota (admins)",
    )
    def patch(self, request: Request, pk: int, quota_id: int) -> Response:
        """The team's live namespaces get the new limit on their ResourceQuota."""
        row = self.quota(request, pk, quota_id)
        fields = lifetimes(valid(QuotaInput, request, partial=True))
        call_service(teams.team_quota_update, quota=row, **fields)
        return Response(quota_line(row))

    @extend_schema(tags=TAG, request=None, responses={200: QuotaOutput}, summary="Remove a quota")
    def delete(self, request: Request, pk: int, quota_id: int) -> Response:
        """Admins: no quota means no limit there. Answers the quota that was."""
        row = self.quota(request, pk, quota_id)
        removed = quota_line(row)
        call_service(teams.team_quota_delete, quota=row)
        return Response(removed)
