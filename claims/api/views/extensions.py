"""More time for a claim: its owner asks, the rules or an approver decide."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import call_service
from claims.api.idempotency import idempotent
from claims.api.views.actions import ObjectApi, ReasonInput
from claims.api.views.base import ApiView
from claims.domain import expiry
from claims.models import ClaimExtension
from claims.policy import limits
from claims.read import selectors

TAG = ["claims"]
EXAMPLE = {
    "id": 4,
    "claim": 7,
    "requested_by": "alice",
    "hours": 24.0,
    "reason": "The training needs one more epoch.",
    "state": "approved",
    "decided_by": "carol",
    "decided_at": "2026-03-08T10:15:00Z",
    "decision": "Approved by carol.",
    "expires_before": "2026-03-09T09:00:00Z",
    "expires_after": "2026-03-10T09:00:00Z",
    "created": "2026-03-08T09:40:00Z",
}


@extend_schema_serializer(
    examples=[OpenApiExample("An extension granted", value=EXAMPLE, response_only=True)]
)
class ExtensionOutput(serializers.ModelSerializer):
    requested_by = serializers.CharField(source="requested_by.username", default=None)
    decided_by = serializers.CharField(source="decided_by.username", default=None)
    hours = serializers.SerializerMethodField()

    class Meta:
        model = ClaimExtension
        fields = [
            "id",
            "claim",
            "requested_by",
            "hours",
            "reason",
            "state",
            "decided_by",
            "decided_at",
            "decision",
            "expires_before",
            "expires_after",
            "created",
        ]

    def get_hours(self, extension: ClaimExtension) -> float:
        return extension.extra.total_seconds() / 3600


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "A day more",
            value={"hours": 24, "reason": "The training needs one more epoch."},
            request_only=True,
        )
    ]
)
class ExtensionInput(serializers.Serializer):
    hours = serializers.IntegerField(min_value=1, max_value=expiry.MAX_EXTENSION_HOURS)
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=limits.REASON_MAX_CHARS
    )


def extension_get(*, user: object, pk: int) -> ClaimExtension:
    """An extension of a claim the user may see (404 otherwise)."""
    claims = selectors.claim_request_list(user=user)
    found = ClaimExtension.objects.filter(claim__in=claims, pk=pk).first()
    if found is None:
        raise Http404
    return found


class ClaimExtensionListApi(ApiView):
    pagination_class = None
    filter_backends: list = []

    @extend_schema(tags=TAG, responses=ExtensionOutput(many=True))
    def get(self, request: Request, pk: int) -> Response:
        """The claim's extensions, newest first."""
        claim = selectors.claim_request_get(user=request.user, pk=pk)
        return Response(ExtensionOutput(claim.extensions.all(), many=True).data)

    @extend_schema(tags=TAG, request=ExtensionInput, responses={201: ExtensionOutput})
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Ask for `hours` more: granted at once when an approval rule allows it (state
        `approved`), else `pending` until an approver decides."""
        claim = selectors.claim_request_get(user=request.user, pk=pk)
        data = ExtensionInput(data=request.data)
        data.is_valid(raise_exception=True)
        extension = call_service(
            expiry.extension_request, user=request.user, claim_request=claim, **data.validated_data
        )
        return Response(ExtensionOutput(extension).data, status=201)


class ExtensionApproveApi(ObjectApi):
    getter = staticmethod(extension_get)
    output = ExtensionOutput

    @extend_schema(tags=TAG, request=None, responses=ExtensionOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Grant the extension (the claim's approvers; not your own unless allowed)."""
        return self.act(expiry.extension_approve, "extension")


class ExtensionRejectApi(ObjectApi):
    getter = staticmethod(extension_get)
    output = ExtensionOutput

    @extend_schema(tags=TAG, request=ReasonInput, responses=ExtensionOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Refuse the extension, with a reason."""
        reason = ReasonInput(data=request.data)
        reason.is_valid(raise_exception=True)
        return self.act(
            expiry.extension_reject, "extension", reason=reason.validated_data["reason"]
        )
