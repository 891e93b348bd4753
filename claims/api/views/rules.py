"""Approval rules: everyone reads the enabled ones (as on the Teams page), staff every rule;
admins add, change and remove them (claims.domain.teams, audited like the admin's edits)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import call_service
from claims.api.serializers.teams import ApprovalRuleOutput
from claims.api.views.base import ApiView
from claims.api.views.teams import TAG, lifetime_field, lifetimes, require_admin, valid
from claims.domain import teams
from claims.models import ApprovalRule, Cluster, Team

RULE_INPUT = OpenApiExample(
    "Small claims of one team",
    value={
        "name": "small-vision-claims",
        "applies_to": "claim",
        "team": 3,
        "device_class": "gpu.nvidia.com",
        "max_devices": 1,
    },
)


def visible_rules(*, user: Any) -> QuerySet[ApprovalRule]:
    rules = ApprovalRule.objects.select_related("team", "cluster")
    return rules.all() if user.is_staff else rules.filter(enabled=True)


class RuleInput(serializers.Serializer):
    name = serializers.SlugField(max_length=100, help_text="Named in the audit trail.")
    applies_to = serializers.ChoiceField(
        ApprovalRule.AppliesTo.choices, default=ApprovalRule.AppliesTo.CLAIM
    )
    team = serializers.PrimaryKeyRelatedField(
        queryset=Team.objects.all(), allow_null=True, required=False, help_text="null: every team."
    )
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        allow_null=True,
        required=False,
        help_text="null: every cluster.",
    )
    device_class = serializers.CharField(
        max_length=253, allow_blank=True, required=False, help_text='"": every device class.'
    )
    max_devices = serializers.IntegerField(
        min_value=0, allow_null=True, required=False, help_text="null: any number."
    )
    max_lifetime_seconds = lifetime_field(
        "Extensions: the claim's whole lifetime stays within this; null: any."
    )
    enabled = serializers.BooleanField(default=True)
    position = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, default=100, help_text="Lowest is tried first."
    )


class RuleListApi(ApiView):
    model = ApprovalRule
    list_selector = staticmethod(visible_rules)
    filter_backends: list[Any] = [*ApiView.filter_backends[1:]]
    ordering_fields = ["position", "name", "id"]

    @extend_schema(tags=TAG, responses=ApprovalRuleOutput(many=True), summary="List approval rules")
    def get(self, request: Request) -> Response:
        """In the order they are tried; staff also see the disabled ones."""
        return self.list_response(ApprovalRuleOutput)

    @extend_schema(
        tags=TAG,
        request=RuleInput,
        responses={201: ApprovalRuleOutput},
        examples=[RULE_INPUT],
        summary="Add an approval rule (admins)",
    )
    def post(self, request: Request) -> Response:
        require_admin(request, "add_approvalrule")
        fields = lifetimes(valid(RuleInput, request))
        rule = call_service(teams.approval_rule_create, **fields)
        return Response(ApprovalRuleOutput(rule).data, status=201)


class RuleDetailApi(ApiView):
    filter_backends: list[Any] = []
    pagination_class = None

    def rule(self, request: Request, pk: int, permission: str) -> ApprovalRule:
        # Read from the list; here only admins, so a 403 comes before any lookup.
        require_admin(request, permission)
        return get_object_or_404(ApprovalRule.objects.select_related("team", "cluster"), pk=pk)

    @extend_schema(
        tags=TAG,
        request=RuleInput(partial=True),
        responses=ApprovalRuleOutput,
        examples=[OpenApiExample("Disable", value={"enabled": False})],
        summary="Change an approval rule (admins)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        rule = self.rule(request, pk, "change_approvalrule")
        fields = lifetimes(valid(RuleInput, request, partial=True))
        call_service(teams.approval_rule_update, rule=rule, **fields)
        return Response(ApprovalRuleOutput(rule).data)

    @extend_schema(
        tags=TAG, request=None, responses={200: ApprovalRuleOutput}, summary="Remove a rule"
    )
    def delete(self, request: Request, pk: int) -> Response:
        """Admins. Answers the rule that was."""
        rule = self.rule(request, pk, "delete_approvalrule")
        removed = ApprovalRuleOutput(rule).data
        call_service(teams.approval_rule_delete, rule=rule)
        return Response(removed)
