"""Workload profiles (everyone reads the offered ones; admins write) and the workloads
started from them on a claim: list, start (Idempotency-Key), read, stop."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api import examples
from claims.api.errors import call_service
from claims.api.filters import WorkloadFilter
from claims.api.idempotency import idempotent
from claims.api.serializers.workloads import WorkloadOutput, WorkloadProfileOutput
from claims.api.views.actions import WAIT_PARAMETERS, ObjectApi, visible_or_field_error
from claims.api.views.base import ApiView
from claims.api.views.runs import SINCE, LogParams, log_response
from claims.api.views.teams import valid
from claims.domain import services
from claims.models import Workload, WorkloadKind, WorkloadProfile
from claims.read import selectors

TAG = ["workloads"]

START_JOB = OpenApiExample(
    "A training job",
    value={
        "claim": 7,
        "profile": 2,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": "python train.py",
        "args": "--epochs 3 --out /tmp/model",
        "env": {"WANDB_MODE": "offline"},
    },
    request_only=True,
)


def require_admin(request: Request, permission: str) -> None:
    """Staff with the model permission, as the Django admin asks of whoever edits there."""
    user = request.user
    if not (user.is_staff and user.has_perm(f"claims.{permission}")):
        raise PermissionDenied(gettext("Only an admin changes workload profiles."))


class ProfileInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(WorkloadKind.choices)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    image = serializers.CharField(max_length=500)
    command = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Shell words."
    )
    args = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Shell words."
    )
    env = serializers.JSONField(required=False, default=dict, help_text="{NAME: value}")
    cpu_request = serializers.CharField(required=False, allow_blank=True, default="")
    cpu_limit = serializers.CharField(required=False, allow_blank=True, default="")
    memory_request = serializers.CharField(required=False, allow_blank=True, default="")
    memory_limit = serializers.CharField(required=False, allow_blank=True, default="")
    ports = serializers.ListField(
        child=serializers.JSONField(), required=False, default=list, help_text="[8888]"
    )
    allow_any_image = serializers.BooleanField(required=False, default=False)
    allowed_images = serializers.ListField(
        child=serializers.CharField(max_length=500),
        required=False,
        default=list,
        help_text='References, or prefixes ending in "*".',
    )
    active_deadline_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1
    )
    backoff_limit = serializers.IntegerField(required=False, default=0, min_value=0, max_value=20)
    active = serializers.BooleanField(required=False, default=True)


class ProfileListApi(ApiView):
    model = WorkloadProfile
    list_selector = staticmethod(selectors.workload_profile_list)
    filter_backends: list[Any] = [*ApiView.filter_backends[1:]]
    ordering_fields = ["name", "id"]

    @extend_schema(tags=TAG, responses=WorkloadProfileOutput(many=True))
    def get(self, request: Request) -> Response:
        """The profiles a workload may be started from (staff: also those no longer offered)."""
        return self.list_response(WorkloadProfileOutput)

    @extend_schema(
        tags=TAG,
        request=ProfileInput,
        responses={201: WorkloadProfileOutput},
        examples=[
            OpenApiExample(
                "A notebook",
                value={
                    "name": "TensorBoard",
                    "kind": "notebook",
                    "image": "tensorflow/tensorflow:2.16.1-gpu",
                    "command": "tensorboard --logdir /tmp/logs --bind_all",
                    "ports": [6006],
                    "memory_limit": "8Gi",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Added", value=examples.WORKLOAD_PROFILE, response_only=True, status_codes=[201]
            ),
        ],
        summary="Add a workload profile (admins)",
    )
    def post(self, request: Request) -> Response:
        require_admin(request, "add_workloadprofile")
        fields = valid(ProfileInput, request)
        profile = call_service(services.workload_profile_save, profile=WorkloadProfile(), **fields)
        return Response(WorkloadProfileOutput(profile).data, status=201)


class ProfileDetailApi(ApiView):
    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(tags=TAG, responses=WorkloadProfileOutput)
    def get(self, request: Request, pk: int) -> Response:
        profile = get_object_or_404(selectors.workload_profile_list(user=request.user), pk=pk)
        return Response(WorkloadProfileOutput(profile).data)

    @extend_schema(
        tags=TAG,
        request=ProfileInput(partial=True),
        responses=WorkloadProfileOutput,
        examples=[OpenApiExample("No longer offered", value={"active": False})],
        summary="Change a workload profile (admins)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        require_admin(request, "change_workloadprofile")
        profile = get_object_or_404(WorkloadProfile, pk=pk)
        fields = valid(ProfileInput, request, partial=True)
        call_service(services.workload_profile_save, profile=profile, **fields)
        return Response(WorkloadProfileOutput(profile).data)

    @extend_schema(tags=TAG, request=None, responses={200: WorkloadProfileOutput})
    def delete(self, request: Request, pk: int) -> Response:
        """Admins. Workloads started from it keep running what they run."""
        require_admin(request, "delete_workloadprofile")
        profile = get_object_or_404(WorkloadProfile, pk=pk)
        removed = WorkloadProfileOutput(profile).data
        call_service(services.workload_profile_delete, profile=profile)
        return Response(removed)


class WorkloadInput(serializers.Serializer):
    claim = serializers.IntegerField(help_text="Id of the claim (approved and applied).")
    profile = serializers.IntegerField(help_text="Id of the profile to start from.")
    image = serializers.CharField(
        required=False, allow_blank=True, help_text="Where the profile allows another image."
    )
    command = serializers.CharField(
        required=False, allow_blank=True, help_text="A batch job's command, as shell words."
    )
    args = serializers.CharField(
        required=False, allow_blank=True, help_text="A batch job's arguments, as shell words."
    )
    env = serializers.JSONField(
        required=False, help_text="{NAME: value}, added to (or replacing) the profile's."
    )


class WorkloadListApi(ApiView):
    model = Workload
    list_selector = staticmethod(selectors.workload_list)
    filterset_class = WorkloadFilter
    ordering_fields = ["created", "updated", "state"]

    @extend_schema(tags=TAG, responses=WorkloadOutput(many=True))
    def get(self, request: Request) -> Response:
        """Your workloads (approvers: everyone's)."""
        queryset = self.filter_queryset(self.get_queryset())
        page = list(self.paginate_queryset(queryset) or [])
        data = WorkloadOutput(page, many=True, context={"user": request.user}).data
        return self.get_paginated_response(data)

    @extend_schema(
        tags=TAG,
        request=WorkloadInput,
        responses={201: WorkloadOutput},
        examples=[
            START_JOB,
            OpenApiExample(
                "Started", value=examples.WORKLOAD, response_only=True, status_codes=[201]
            ),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Start a batch job or a notebook on the claim's GPU; every container shares the
        claim. Send an Idempotency-Key to retry safely."""
        data = valid(WorkloadInput, request)
        claim = visible_or_field_error(
            selectors.claim_request_get, request.user, data.pop("claim"), "claim"
        )
        workload = call_service(
            services.workload_start, user=request.user, claim_request=claim, **data
        )
        workload.claim = claim
        return Response(WorkloadOutput(workload, context={"user": request.user}).data, status=201)


class WorkloadDetailApi(ObjectApi):
    getter = staticmethod(selectors.workload_get)
    output = WorkloadOutput

    def respond(self, obj: Any, status: int = 200) -> Response:
        return Response(
            WorkloadOutput(obj, context={"user": self.request.user}).data, status=status
        )

    @extend_schema(tags=TAG, parameters=WAIT_PARAMETERS, responses=WorkloadOutput)
    def get(self, request: Request, pk: int) -> Response:
        """One workload; `?wait=30&state=started` answers as soon as the state changes."""
        return self.retrieve_after_wait(request)


class WorkloadStopApi(ObjectApi):
    getter = staticmethod(selectors.workload_get)
    output = WorkloadOutput

    def respond(self, obj: Any, status: int = 200) -> Response:
        return Response(
            WorkloadOutput(obj, context={"user": self.request.user}).data, status=status
        )

    @extend_schema(
        tags=TAG,
        request=None,
        responses={200: WorkloadOutput},
        examples=[OpenApiExample("Stopped", value=examples.STOPPED_WORKLOAD, response_only=True)],
    )
    def post(self, request: Request, pk: int) -> Response:
        """Stop it: it ends stopped and its Job (with its Pods), or its notebook's Pod,
        Service and Ingress, are deleted. 409 when it already ended."""
        return self.act(services.workload_stop, "workload")


class WorkloadLogApi(ObjectApi):
    @extend_schema(
        tags=TAG,
        parameters=[SINCE],
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                description="What its `main` container printed (a Job's Pods one after the "
                "other, each retry under a `==> pod <==` line), from `since` on. Headers as a "
                "run's log: X-Next-Since, X-Log-Complete (true once it ended and its log was "
                "read to the end), X-Log-Unreadable, X-Log-Truncated.",
                examples=[OpenApiExample("train-sim", value=examples.TRAIN_LOG)],
            )
        },
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        """Its log as plain text."""
        workload, log = selectors.workload_log_get(user=request.user, pk=pk)
        params = LogParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        return log_response(workload, log, params.validated_data["since"])
