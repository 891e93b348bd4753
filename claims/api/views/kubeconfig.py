"""A kubeconfig for the owner of an active namespace: kubectl as their ServiceAccount there."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext, gettext_lazy
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from claims.api import examples
from claims.api.errors import StateConflict, call_service
from claims.api.schema import ErrorDetail
from claims.api.views.actions import ObjectApi
from claims.domain import access
from claims.kube.errors import KubeError, TransientKubeError
from claims.read import selectors

NAMED_ENTRIES = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
KUBECONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "clusters": NAMED_ENTRIES,
        "users": NAMED_ENTRIES,
        "contexts": NAMED_ENTRIES,
        "current-context": {"type": "string"},
    },
    "required": ["apiVersion", "kind", "clusters", "users", "contexts", "current-context"],
}
DESCRIPTION = (
    "A kubeconfig (YAML, as an attachment) that reaches the namespace's cluster as your "
    "ServiceAccount there, with a fresh token that lasts ACCESS_TOKEN_SECONDS (8 hours by "
    "default); its context already names the namespace. Only the owner may download it "
    "(approvers get 403, other users 404); 409 until the namespace is active and its access "
    "set up; 503 when the cluster does not answer. Each call issues a new token, so it is "
    "safe to repeat and no Idempotency-Key is kept."
)


class ClusterUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = gettext_lazy("The cluster did not answer in time; try again in a minute.")
    default_code = "cluster_unavailable"


class NamespaceKubeconfigApi(ObjectApi):
    getter = staticmethod(selectors.namespace_request_get)
    replays_idempotency_key = False

    @extend_schema(
        tags=["namespace requests"],
        request=None,
        description=DESCRIPTION,
        summary="Download a kubeconfig for your namespace",
        responses={
            (200, "application/yaml"): OpenApiResponse(
                KUBECONFIG_SCHEMA,
                description="The kubeconfig; Content-Disposition names the file.",
                examples=[OpenApiExample("Your kubeconfig", value=examples.KUBECONFIG)],
            ),
            409: OpenApiResponse(ErrorDetail, description="Not active, or access not set up."),
            503: OpenApiResponse(ErrorDetail, description=ClusterUnavailable.default_detail),
        },
    )
    def post(self, request: Request, pk: int) -> HttpResponse:
        ns = self.get_object()
        try:
            config = call_service(access.issue_kubeconfig, user=request.user, namespace_request=ns)
        except TransientKubeError:
            raise ClusterUnavailable() from None
        except KubeError as error:
            raise StateConflict(
                gettext("The cluster refused to issue a token: %(message)s")
                % {"message": error.message}
            ) from None
        return kubeconfig_response(config)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The answer is YAML whatever Accept asks for, and errors are JSON: never a 406.
        return super().perform_content_negotiation(request, force=True)


def kubeconfig_response(config: access.Kubeconfig) -> HttpResponse:
    """The YAML as an attachment that no cache keeps (it holds a bearer token)."""
    response = HttpResponse(config.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, config.filename)
    response["Cache-Control"] = "no-store"
    return response
