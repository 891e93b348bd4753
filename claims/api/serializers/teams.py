"""What the API shows of teams: members, quotas with what the team holds of each now, and the
approval rules (as the Teams page shows them)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from claims.api.serializers.common import _example
from claims.models import ApprovalRule, Team, TeamMembership
from claims.policy.quota import QuotaLine

WHEN = "2026-11-30T09:00:00Z"
MEMBER = {"id": 5, "username": "alice", "role": "member", "joined": WHEN}
QUOTA = {
    "id": 2,
    "cluster": 1,
    "cluster_name": "kubesim",
    "device_class": "gpu.nvidia.com",
    "max_devices": 4,
    "max_lifetime_seconds": 604800,
    "default_lifetime_seconds": 86400,
    "held": 3,
    "room": 1,
}
RULE = {
    "id": 1,
    "name": "small-vision-claims",
    "applies_to": "claim",
    "team": 3,
    "cluster": None,
    "device_class": "gpu.nvidia.com",
    "max_devices": 1,
    "max_lifetime_seconds": None,
    "enabled": True,
    "position": 100,
    "description": "claim requests of team vision of class gpu.nvidia.com with at most 1 device",
}
TEAM = {
    "id": 3,
    "name": "vision",
    "auto_approve": False,
    "idle_reclaim": True,
    "idle_threshold": 0.05,
    "idle_window_seconds": 14400,
    "idle_grace_seconds": 86400,
    "kueue_local_queue": "",
    "role": "member",
}
TEAM_DETAIL = {**TEAM, "members": [MEMBER], "quotas": [QUOTA], "approval_rules": [RULE]}


def seconds(value: timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


@extend_schema_serializer(examples=_example("A member", MEMBER))
class MemberOutput(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = TeamMembership
        fields = ["id", "username", "role", "joined"]


@extend_schema_serializer(examples=_example("Four GPUs, three held", QUOTA))
class QuotaOutput(serializers.Serializer):
    """A QuotaLine: the quota row and the devices the team's live claims hold of it."""

    id = serializers.IntegerField(source="quota.pk")
    cluster = serializers.IntegerField(source="quota.cluster_id")
    cluster_name = serializers.CharField(source="quota.cluster.name")
    device_class = serializers.CharField(source="quota.device_class")
    max_devices = serializers.IntegerField(
        source="quota.max_devices", allow_null=True, help_text="null: no limit."
    )
    max_lifetime_seconds = serializers.SerializerMethodField(help_text="null: no cap.")
    default_lifetime_seconds = serializers.SerializerMethodField(
        help_text="A claim's lifetime unless it asks for another; null: none set."
    )
    held = serializers.IntegerField(
        help_text="Devices the team's live claims (pending ones included) hold or ask for."
    )
    room = serializers.SerializerMethodField(help_text="How many more fit; null: no limit.")

    def get_max_lifetime_seconds(self, line: QuotaLine) -> int | None:
        return seconds(line.quota.max_lifetime)

    def get_default_lifetime_seconds(self, line: QuotaLine) -> int | None:
        return seconds(line.quota.default_lifetime)

    def get_room(self, line: QuotaLine) -> int | None:
        limit = line.quota.max_devices
        return None if limit is None else max(limit - line.held, 0)


@extend_schema_serializer(examples=_example("A rule", RULE))
class ApprovalRuleOutput(serializers.ModelSerializer):
    max_lifetime_seconds = serializers.SerializerMethodField(
        help_text="Extensions: the claim's whole lifetime stays within this; null: any."
    )
    description = serializers.CharField(source="describe", help_text="As the Teams page says it.")

    class Meta:
        model = ApprovalRule
        fields = [
            "id",
            "name",
            "applies_to",
            "team",
            "cluster",
            "device_class",
            "max_devices",
            "max_lifetime_seconds",
            "enabled",
            "position",
            "description",
        ]

    def get_max_lifetime_seconds(self, rule: ApprovalRule) -> int | None:
        return seconds(rule.max_lifetime)


@extend_schema_serializer(examples=_example("A team", TEAM))
class TeamOutput(serializers.ModelSerializer):
    idle_window_seconds = serializers.SerializerMethodField(
        help_text="Idle reclaim: how long a claim stays idle before its owner is warned."
    )
    idle_grace_seconds = serializers.SerializerMethodField(
        help_text="Idle reclaim: from the warning to the release."
    )
    role = serializers.SerializerMethodField(
        help_text='Your role in the team ("member" or "approver"); null when you are not in it.'
    )

    class Meta:
        model = Team
        fields = [
            "id",
            "name",
            "auto_approve",
            "idle_reclaim",
            "idle_threshold",
            "idle_window_seconds",
            "idle_grace_seconds",
            "kueue_local_queue",
            "role",
        ]

    def get_idle_window_seconds(self, team: Team) -> int | None:
        return seconds(team.idle_window)

    def get_idle_grace_seconds(self, team: Team) -> int | None:
        return seconds(team.idle_grace)

    def get_role(self, team: Team) -> str | None:
        user_id = self.context["user"].pk
        roles = (m.role for m in team.memberships.all() if m.user_id == user_id)
        return next(roles, None)


@extend_schema_serializer(examples=_example("A team with a quota", TEAM_DETAIL))
class TeamDetailOutput(TeamOutput):
    members = MemberOutput(many=True, source="memberships")
    quotas = serializers.SerializerMethodField()
    approval_rules = serializers.SerializerMethodField(
        help_text="The enabled rules that may approve the team's requests, in the order they "
        "are tried (rules of every team included)."
    )

    class Meta(TeamOutput.Meta):
        fields = [*TeamOutput.Meta.fields, "members", "quotas", "approval_rules"]

    @extend_schema_field(QuotaOutput(many=True))
    def get_quotas(self, team: Team) -> list[dict[str, Any]]:
        return list(QuotaOutput(self.context["quota_lines"], many=True).data)

    @extend_schema_field(ApprovalRuleOutput(many=True))
    def get_approval_rules(self, team: Team) -> list[dict[str, Any]]:
        return list(ApprovalRuleOutput(self.context["rules"], many=True).data)
