"""Claim requests: ask (with alternatives), list, read (long-poll), approve, reject, retry,
release, and an approver's move in the queue. Namespace requests are in namespaces.py."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from claims.api import examples
from claims.api.errors import api_error
from claims.api.filters import ClaimRequestFilter
from claims.api.idempotency import idempotent
from claims.api.serializers import (
    ClaimRequestOutput,
    claims_page_context,
)
from claims.api.views.actions import (
    WAIT_PARAMETERS,
    ApproverActionApi,
    ObjectApi,
    ReasonInput,
    given_reason,
    visible_or_field_error,
)
from claims.api.views.base import ApiView
from claims.domain import services
from claims.models import ClaimRequest
from claims.policy import limits, validation
from claims.policy.validation import MAX_ALTERNATIVES
from claims.read import selectors

CLAIM_TAG = ["claims"]


class AlternativesOrDevice(serializers.Serializer):
    """Input of a claim's devices: the flat device fields, or `alternatives` (at most 8)."""

    def validate_alternatives(self, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(given) > MAX_ALTERNATIVES:
            raise serializers.ValidationError(
                f"At most {MAX_ALTERNATIVES} alternatives (DRA's prioritized list)."
            )
        return given

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = attrs.get("alternatives")
        if given is None and not attrs.get("device_class"):
            raise serializers.ValidationError({"device_class": ["This field is required."]})
        if given is not None and not given:
            raise serializers.ValidationError({"alternatives": ["Give at least one."]})
        return attrs


class AlternativeInput(serializers.Serializer):
    device_class = serializers.CharField(max_length=limits.DEVICE_CLASS_MAX_CHARS)
    gpu_model = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    min_memory = serializers.CharField(required=False, allow_blank=True, default="", max_length=32)
    mig_profile = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    count = serializers.IntegerField(required=False, allow_null=True, default=1)
    all_devices = serializers.BooleanField(required=False, default=False)


class ClaimListApi(ApiView):
    model = ClaimRequest
    list_selector = staticmethod(selectors.claim_request_api_rows)
    filterset_class = ClaimRequestFilter

    class ClaimRequestInput(AlternativesOrDevice):
        namespace_request = serializers.IntegerField(help_text="Id of your namespace request.")
        name = serializers.CharField(
            max_length=limits.NAME_MAX_CHARS, help_text="A DNS-1123 label, e.g. gpu-claim."
        )
        device_class = serializers.CharField(
            required=False,
            max_length=limits.DEVICE_CLASS_MAX_CHARS,
            help_text="e.g. gpu.nvidia.com; required unless `alternatives` are given.",
        )
        count = serializers.IntegerField(required=False, allow_null=True, default=1)
        all_devices = serializers.BooleanField(required=False, default=False)
        selector = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=limits.SELECTOR_MAX_BYTES,
            help_text="Optional CEL expression (at most 10 KiB, the cluster's limit). With "
            "picker fields, both must hold; the claim's `selector` is the combined CEL.",
        )
        gpu_model = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=64,
            help_text="Device picker: a productName the cluster publishes.",
        )
        min_memory = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=32,
            help_text="Device picker: at least this much device memory, e.g. 40Gi.",
        )
        mig_profile = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=64,
            help_text="Device picker: a MIG profile the cluster publishes, e.g. 1g.5gb.",
        )
        purpose = serializers.CharField(
            required=False, allow_blank=True, max_length=limits.PURPOSE_MAX_CHARS
        )
        alternatives = AlternativeInput(
            many=True,
            required=False,
            help_text="DRA's prioritized list, instead of the flat device fields: what would "
            "do, in order of preference (at most 8); the cluster allocates the first that "
            "fits. `selector` holds for each.",
        )

    @extend_schema(tags=CLAIM_TAG, responses=ClaimRequestOutput(many=True))
    def get(self, request: Request) -> Response:
        """Your claims (approvers: everyone's)."""
        return self.list_response(ClaimRequestOutput, claims_page_context)

    @extend_schema(
        tags=CLAIM_TAG,
        request=ClaimRequestInput,
        responses={201: ClaimRequestOutput},
        examples=[
            OpenApiExample(
                "One GPU",
                value={
                    "namespace_request": 3,
                    "name": "gpu-claim",
                    "device_class": "gpu.nvidia.com",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Requested", value=examples.PENDING_CLAIM, response_only=True, status_codes=[201]
            ),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Ask for a GPU claim in one of your namespaces; an approver decides."""
        serializer = self.ClaimRequestInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data["namespace_request"] = visible_or_field_error(
            selectors.namespace_request_get,
            request.user,
            data["namespace_request"],
            "namespace_request",
        )
        given = data.pop("alternatives", None)
        if given is not None:
            data |= given[0]
            data["alternatives"] = given[1:]
        try:
            claim = services.claim_request_submit(user=request.user, ask_cluster=True, **data)
        except DjangoValidationError as error:
            raise _claim_error(error, by_alternative=given is not None) from None
        return Response(ClaimRequestOutput(claim).data, status=201)


def _claim_error(error: DjangoValidationError, *, by_alternative: bool) -> APIException:
    found = api_error(error)
    if by_alternative and isinstance(found, serializers.ValidationError):
        return serializers.ValidationError(per_alternative(error.message_dict))
    return found


def per_alternative(errors: dict[str, list[str]]) -> dict[str, Any]:
    """A claim given as `alternatives`: the errors of each alternative's fields under its
    index (`{"alternatives": {"1": {"count": [...]}}}`), the rest as they are."""
    rows: dict[int, dict[str, list[str]]] = {}
    rest: dict[str, Any] = {}
    for key, messages in errors.items():
        found = validation.split_alternative_key(key)
        if found is not None:
            rows.setdefault(found[0] - 1, {})[found[1]] = messages
        elif key in validation.ALTERNATIVE_FIELDS:
            rows.setdefault(0, {})[key] = messages
        else:
            rest[api_settings.NON_FIELD_ERRORS_KEY if key == NON_FIELD_ERRORS else key] = messages
    if rows:  # keyed by index as DRF keys the errors of the list's own fields
        rest["alternatives"] = {str(index): rows[index] for index in sorted(rows)}
    return rest


class ClaimDetailApi(ObjectApi):
    getter = staticmethod(selectors.claim_request_get)
    output = ClaimRequestOutput

    @extend_schema(tags=CLAIM_TAG, parameters=WAIT_PARAMETERS, responses=ClaimRequestOutput)
    def get(self, request: Request, pk: int) -> Response:
        """One claim; `?wait=30&state=pending` answers as soon as the state changes."""
        return self.retrieve_after_wait(request)

    class ReleaseParams(serializers.Serializer):
        force = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        tags=CLAIM_TAG,
        parameters=[
            OpenApiParameter(
                "force",
                bool,
                description="Release even though a run's log has not been read yet (its Pod, "
                "and the log with it, is deleted); without it such a release is a 409.",
            )
        ],
        responses={200: ClaimRequestOutput},
    )
    def delete(self, request: Request, pk: int) -> Response:
        """Release the claim: its ResourceClaim and the Pods of its verification runs are
        deleted. A run still going ends as failed ("The claim was released."), and the runs'
        records stay. To stop only a run, keeping the claim: `DELETE /api/v1/runs/{id}/`.
        A run whose log the cluster has not given yet would lose it: 409 unless `?force=true`."""
        params = self.ReleaseParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        force = params.validated_data["force"]
        return self.act(services.claim_request_release, "claim_request", force=force)


class ClaimApproveApi(ApproverActionApi):
    getter = staticmethod(selectors.claim_request_get)
    output = ClaimRequestOutput

    @extend_schema(tags=CLAIM_TAG, request=None, responses=ClaimRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Approve (approvers only): the ResourceClaim is applied; a pending namespace too."""
        return self.act(services.claim_request_approve, "claim_request")


class ClaimRejectApi(ApproverActionApi):
    getter = staticmethod(selectors.claim_request_get)
    output = ClaimRequestOutput

    @extend_schema(tags=CLAIM_TAG, request=ReasonInput, responses=ClaimRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Reject with a reason (approvers only)."""
        reason = given_reason(request)
        return self.act(services.claim_request_reject, "claim_request", reason=reason)


class ClaimRetryApi(ObjectApi):
    getter = staticmethod(selectors.claim_request_get)
    output = ClaimRequestOutput

    @extend_schema(tags=CLAIM_TAG, request=None, responses=ClaimRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Apply a failed claim again."""
        return self.act(services.claim_request_retry, "claim_request")


@extend_schema_serializer(
    examples=[OpenApiExample("Move up", value={"direction": "up", "reason": "A paper deadline."})]
)
class QueueMoveInput(serializers.Serializer):
    direction = serializers.ChoiceField(choices=["up", "down"])
    reason = serializers.CharField(max_length=limits.REASON_MAX_CHARS)


class ClaimQueueMoveApi(ApproverActionApi):
    getter = staticmethod(selectors.claim_request_get)
    output = ClaimRequestOutput

    @extend_schema(tags=CLAIM_TAG, request=QueueMoveInput, responses=ClaimRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Move a waiting claim up or down in its queue, saying why (approvers only)."""
        serializer = QueueMoveInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        return self.act(
            services.claim_request_queue_move, "claim_request", **serializer.validated_data
        )
