"""The whole audit trail, read-only, for approvers and staff (everyone else: 403; a user's
own objects' events are at /api/v1/events/)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from claims import audit, selectors
from claims.api.views.base import ApiView
from claims.models import AuditEvent

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


class IsAuditor(BasePermission):
    message = "Only approvers and staff can read the audit trail; see /api/v1/events/ for yours."

    def has_permission(self, request: Request, view: Any) -> bool:
        return selectors.user_is_approver(request.user)


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
    permission_classes = [IsAuthenticated, IsAuditor]
    list_selector = staticmethod(audit.trail)
    filterset_class = audit.AuditTrailFilter
    ordering_fields = ["created", "id"]

    @extend_schema(tags=["events"], responses=AuditTrailOutput(many=True))
    def get(self, request: Request) -> Response:
        """Every action (state changes, logins, tokens, kubeconfigs, admins' edits), newest
        first; the same filters as the audit page and its CSV export. Approvers and staff only.
        """
        return self.list_response(AuditTrailOutput)
