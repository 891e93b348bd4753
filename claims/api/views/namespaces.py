"""Namespace requests: ask, list, read (long-poll), approve, reject, retry, withdraw or
delete."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api import examples
from claims.api.errors import call_service
from claims.api.filters import NamespaceRequestFilter
from claims.api.idempotency import idempotent
from claims.api.serializers import NamespaceRequestOutput
from claims.api.views.actions import (
    WAIT_PARAMETERS,
    ApproverActionApi,
    ObjectApi,
    ReasonInput,
    given_reason,
)
from claims.api.views.base import ApiView
from claims.clusters import registry as cluster_registry
from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from claims.policy import limits
from claims.read import selectors

NS_TAG = ["namespace requests"]


class NamespaceRequestListApi(ApiView):
    model = NamespaceRequest
    list_selector = staticmethod(selectors.namespace_request_list)
    filterset_class = NamespaceRequestFilter

    class NamespaceRequestInput(serializers.Serializer):
        cluster = serializers.PrimaryKeyRelatedField(
            queryset=Cluster.objects.all(),
            required=False,
            help_text="Optional while the portal has exactly one cluster.",
        )
        name = serializers.CharField(
            max_length=limits.NAME_MAX_CHARS, help_text="A DNS-1123 label, e.g. team-vision."
        )
        purpose = serializers.CharField(
            required=False, allow_blank=True, max_length=limits.PURPOSE_MAX_CHARS
        )

    @extend_schema(tags=NS_TAG, responses=NamespaceRequestOutput(many=True))
    def get(self, request: Request) -> Response:
        """Your namespace requests (approvers: everyone's)."""
        return self.list_response(NamespaceRequestOutput)

    @extend_schema(
        tags=NS_TAG,
        request=NamespaceRequestInput,
        responses={201: NamespaceRequestOutput},
        examples=[
            OpenApiExample(
                "Ask for a namespace",
                value={"cluster": 1, "name": "team-vision", "purpose": "Training"},
                request_only=True,
            ),
            OpenApiExample(
                "Requested",
                value=examples.NAMESPACE_REQUEST,
                response_only=True,
                status_codes=[201],
            ),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Ask for a namespace; nothing is created in the cluster before an approver agrees."""
        data = self.parsed(request)
        ns = call_service(
            services.namespace_request_submit, user=request.user, ask_cluster=True, **data
        )
        return Response(NamespaceRequestOutput(ns).data, status=201)

    def parsed(self, request: Request) -> dict:
        serializer = self.NamespaceRequestInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if "cluster" not in data:
            data["cluster"] = call_service(cluster_registry.the_only_cluster)
        return data


class NamespaceRequestDetailApi(ObjectApi):
    getter = staticmethod(selectors.namespace_request_get)
    output = NamespaceRequestOutput

    @extend_schema(tags=NS_TAG, parameters=WAIT_PARAMETERS, responses=NamespaceRequestOutput)
    def get(self, request: Request, pk: int) -> Response:
        """One namespace request; `?wait=30&state=pending` answers when the state changes."""
        return self.retrieve_after_wait(request)

    @extend_schema(tags=NS_TAG, responses={200: NamespaceRequestOutput})
    def delete(self, request: Request, pk: int) -> Response:
        """Withdraw a pending request, or delete the namespace and release its claims."""
        return self.act(services.namespace_request_delete, "namespace_request")


class NamespaceRequestApproveApi(ApproverActionApi):
    getter = staticmethod(selectors.namespace_request_get)
    output = NamespaceRequestOutput

    @extend_schema(tags=NS_TAG, request=None, responses=NamespaceRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Approve (approvers only): the namespace is created in the cluster."""
        return self.act(services.namespace_request_approve, "namespace_request")


class NamespaceRequestRejectApi(ApproverActionApi):
    getter = staticmethod(selectors.namespace_request_get)
    output = NamespaceRequestOutput

    @extend_schema(tags=NS_TAG, request=ReasonInput, responses=NamespaceRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Reject with a reason (approvers only); its pending claims are rejected too."""
        reason = given_reason(request)
        return self.act(services.namespace_request_reject, "namespace_request", reason=reason)


class NamespaceRequestRetryApi(ObjectApi):
    getter = staticmethod(selectors.namespace_request_get)
    output = NamespaceRequestOutput

    @extend_schema(tags=NS_TAG, request=None, responses=NamespaceRequestOutput)
    @idempotent
    def post(self, request: Request, pk: int) -> Response:
        """Apply a failed namespace again."""
        return self.act(services.namespace_request_retry, "namespace_request")
