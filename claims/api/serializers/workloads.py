"""What the API shows of workload profiles and of the workloads started from them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from claims.api import examples
from claims.api.serializers.common import _example
from claims.api.serializers.requests import QueueOutput
from claims.domain import services
from claims.models import KueueState, Workload, WorkloadProfile
from claims.read import queue


@extend_schema_serializer(examples=_example("The seeded batch job", examples.WORKLOAD_PROFILE))
class WorkloadProfileOutput(serializers.ModelSerializer):
    class Meta:
        model = WorkloadProfile
        # What an admin may set (the service layer's list), with the row's own fields.
        fields = ["id", *services.PROFILE_FIELDS, "created", "updated"]


class NotebookAccessOutput(serializers.Serializer):
    port_forward = serializers.CharField(
        help_text="Run this with the namespace's kubeconfig (Namespace page, or "
        "/api/v1/namespace-requests/{id}/kubeconfig/), then open local_url."
    )
    local_url = serializers.CharField()
    url = serializers.CharField(help_text='Its Ingress\'s address; "" where there is none.')
    token = serializers.CharField(help_text='The notebook\'s token: its owner only ("" else).')


class KueueOutput(serializers.Serializer):
    local_queue = serializers.CharField(help_text="The LocalQueue its Job was submitted to.")
    state = serializers.ChoiceField(
        choices=KueueState.choices,
        help_text="Where Kueue's Workload for its Job is (its status conditions).",
    )
    message = serializers.CharField(help_text="Kueue's own words (why it waits, ...).")
    position = serializers.IntegerField(
        allow_null=True,
        help_text="Its place in the LocalQueue from 1, while pending, where the cluster "
        "serves Kueue's visibility API (null elsewhere).",
    )


@extend_schema_serializer(examples=_example("A training job", examples.WORKLOAD))
class WorkloadOutput(serializers.ModelSerializer):
    claim_name = serializers.CharField(source="claim.name")
    namespace = serializers.CharField(source="claim.namespace_request.name")
    cluster_name = serializers.CharField(source="claim.namespace_request.cluster.name")
    owner = serializers.CharField(source="owner.username")
    profile = serializers.IntegerField(source="profile_id", allow_null=True)
    access = serializers.SerializerMethodField()
    duration_seconds = serializers.SerializerMethodField()
    kueue = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            "id",
            "claim",
            "claim_name",
            "namespace",
            "cluster_name",
            "profile",
            "profile_name",
            "kind",
            "name",
            "image",
            "command",
            "args",
            "env",
            "resources",
            "ports",
            "state",
            "state_message",
            "owner",
            "node",
            "pod_name",
            "pod_stage",
            "pod_events",
            "devices",
            "exit_code",
            "duration_seconds",
            "log_error",
            "started_at",
            "finished_at",
            "access",
            "kueue",
            "queue",
            "created",
            "updated",
        ]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_duration_seconds(self, workload: Workload) -> float | None:
        """How long its container ran, from its start to its end (null until it ended)."""
        duration = workload.duration
        return duration.total_seconds() if duration is not None else None

    @extend_schema_field(KueueOutput(allow_null=True))
    def get_kueue(self, workload: Workload) -> dict[str, Any] | None:
        """What Kueue says of its Job, on a cluster where Kueue queues it (null elsewhere)."""
        if not workload.kueue_queue:
            return None
        found = {
            "local_queue": workload.kueue_queue,
            "state": workload.kueue_state,
            "message": workload.kueue_message,
            "position": workload.kueue_position,
        }
        return dict(KueueOutput(found).data)

    @extend_schema_field(NotebookAccessOutput(allow_null=True))
    def get_access(self, workload: Workload) -> dict[str, Any] | None:
        """A notebook's way in (null for a batch job)."""
        user = self.context.get("user")
        found = services.notebook_access(user=user, workload=workload) if user else None
        return NotebookAccessOutput(found).data if found else None

    @extend_schema_field(QueueOutput(allow_null=True))
    def get_queue(self, workload: Workload) -> dict[str, Any] | None:
        """While it waits in the queue (its Job suspended, its notebook not created yet), its
        claim's place there."""
        if not workload.suspended or workload.is_final:
            return None
        spot = queue.spot_of(workload.claim)
        return QueueOutput(spot.as_dict()).data if spot else None
