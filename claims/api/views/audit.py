"""The audit trail, read-only: approvers and staff read every row, everyone else the rows
about their own things (their requests and runs, their logins, their tokens)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.views.base import ApiView
from claims.models import AuditEvent
from claims.read import audit_trail, selectors

EXAMPLE = {
    "id": 41,
    "created": "2026-11-30T09:00:12Z",
    "action": "state_change",
    "actor": "system",
    "channel": "system",
    "client_ip": None,
    "user_agent": "",
    "object_kind": "claim_request",
    "object_id": 7,
    "object_name": "gpu-claim",
    "from_state": "applying",
    "to_state": "waiting",
    "message": "ResourceClaim created (v1). DRA allocates a GPU only while a Pod uses it.",
    "before": {"state": "applying"},
    "after": {"state": "waiting", "applied_api_version": "resource.k8s.io/v1"},
    "manifest_sha256": "9f2c4e0b" + "0" * 56,
    "allocation": None,
    "result": None,
}


def visible_trail(*, user: Any) -> QuerySet[AuditEvent]:
    trail = audit_trail.trail()
    return trail if selectors.user_is_approver(user) else trail.filter(owner=user)


@extend_schema_serializer(examples=[OpenApiExample("A claim applied", EXAMPLE, response_only=True)])
class AuditTrailOutput(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", help_text='"system" for the portal.')

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created",
            "action",
            "actor",
            "channel",
            "client_ip",
            "user_agent",
            "object_kind",
            "object_id",
            "object_name",
            "from_state",
            "to_state",
            "message",
            "before",
            "after",
            "manifest_sha256",
            "allocation",
            "result",
        ]


class AuditTrailApi(ApiView):
    model = AuditEvent
    list_selector = staticmethod(visible_trail)
    filterset_class = audit_trail.AuditTrailFilter
    ordering_fields = ["created", "id"]

    @extend_schema(tags=["events"], responses=AuditTrailOutput(many=True))
    def get(self, request: Request) -> Response:
        """Every action (state changes, logins, tokens, kubeconfigs, admins' edits), newest
        first, with the same filters as the audit page and its CSV export. Approvers and staff
        read every row; anyone else the rows about their own things."""
        return self.list_response(AuditTrailOutput)
