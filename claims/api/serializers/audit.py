"""What the API shows of the audit trail: one row per change of state."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from claims.api import examples
from claims.api.serializers.common import _example
from claims.models import AuditEvent


@extend_schema_serializer(examples=_example("An approval", examples.AUDIT_EVENT))
class AuditEventOutput(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", help_text='"system" for the cluster.')
    owner = serializers.CharField(source="owner.username", allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "object_kind",
            "object_id",
            "object_name",
            "owner",
            "actor",
            "from_state",
            "to_state",
            "message",
            "created",
        ]
