"""Clusters as the portal last saw them: versions, device classes, devices; and who am I.
Admins register a cluster (a kubeconfig, stored encrypted, or in-cluster), check it again and
remove it (claims.clusters.registry)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api import examples
from claims.api.errors import call_service
from claims.api.filters import StrictFilterSet, TextFilter, TrueFalseFilter
from claims.api.serializers import ClusterOutput, DeviceClassOutput, DeviceOutput, MeOutput
from claims.api.views.base import ApiView
from claims.clusters import credentials
from claims.clusters import registry as cluster_registry
from claims.models import Cluster
from claims.read import inventory, selectors

TAG = ["clusters"]


class ClusterFilter(StrictFilterSet):
    name = TextFilter()
    simulated = TrueFalseFilter()

    class Meta:
        model = Cluster
        fields = ["name", "simulated"]


class PreflightCheckOutput(serializers.Serializer):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()


class ContactOutput(serializers.Serializer):
    reachable = serializers.BooleanField(help_text="It answered (also when it refused).")
    refused = serializers.BooleanField(
        help_text="It answered, but refused the portal's identity (401/403)."
    )
    problem = serializers.CharField(
        help_text='In plain words, e.g. "connection refused", or "reachable, but the '
        "portal's identity may not: list resourceslices.resource.k8s.io\"."
    )
    missing = serializers.ListField(
        child=serializers.CharField(),
        help_text="The permissions the portal needs that the cluster refuses its identity.",
    )
    preflight = PreflightCheckOutput(many=True)


class CheckedClusterOutput(serializers.Serializer):
    cluster = ClusterOutput()
    contact = ContactOutput()


CLUSTER_EXAMPLE = examples.CLUSTER
CHECKED_EXAMPLE = OpenApiExample(
    "Contacted",
    response_only=True,
    status_codes=["200", "201"],
    value={
        "cluster": CLUSTER_EXAMPLE,
        "contact": {
            "reachable": True,
            "refused": False,
            "problem": "",
            "missing": [],
            "preflight": [
                {
                    "name": "Kubernetes version",
                    "ok": True,
                    "detail": "v1.34.1 (needs 1.33 or newer)",
                }
            ],
        },
    },
)
REGISTER_EXAMPLE = OpenApiExample(
    "Register with a kubeconfig",
    request_only=True,
    value={"name": "berlin-a100", "source": "kubeconfig", "kubeconfig": "apiVersion: v1\n..."},
)


def checked(cluster: Cluster, status: int = 200) -> Response:
    """Contact the cluster now and answer it with what the contact found."""
    contact = cluster_registry.contact(cluster)
    shown = ClusterOutput(cluster, context={"admin": True}).data  # only admins contact
    data = {"cluster": shown, "contact": ContactOutput(contact).data}
    return Response(data, status=status)


def is_admin(request: Request) -> bool:
    return bool(request.user.has_perm("claims.change_cluster"))


def require_admin(request: Request) -> None:
    if not is_admin(request):
        raise PermissionDenied("Only an admin manages clusters.")


class ClusterListApi(ApiView):
    model = Cluster
    list_selector = staticmethod(lambda *, user: selectors.cluster_list())
    filterset_class = ClusterFilter
    ordering_fields = ["name", "created"]

    class ClusterInput(serializers.Serializer):
        # `source` and `context` shadow Field attributes for mypy only: DRF's metaclass
        # takes declared fields off the class.
        name = serializers.CharField(max_length=100)
        source = serializers.ChoiceField(  # type: ignore[assignment]
            choices=[cluster_registry.KUBECONFIG, cluster_registry.IN_CLUSTER],
            default=cluster_registry.KUBECONFIG,
        )
        kubeconfig = serializers.CharField(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            max_length=262144,
            help_text="The kubeconfig's YAML (source kubeconfig); stored encrypted.",
        )
        context = serializers.CharField(  # type: ignore[assignment]
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="Default: the kubeconfig's current context.",
        )
        prometheus_url = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text="The Prometheus scraping this cluster's dcgm-exporters; "
            "default: the portal's PROMETHEUS_URL.",
        )
        prometheus_selector = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text='PromQL label matchers selecting this cluster\'s series, e.g. cluster="lab"; '
            "default: its nodes' names when the Prometheus serves other clusters too.",
        )

    @extend_schema(tags=TAG, responses=ClusterOutput(many=True), summary="List clusters")
    def get(self, request: Request) -> Response:
        return self.list_response(ClusterOutput, lambda page: {"admin": is_admin(request)})

    @extend_schema(
        tags=TAG,
        request=ClusterInput,
        responses={201: CheckedClusterOutput},
        examples=[REGISTER_EXAMPLE, CHECKED_EXAMPLE],
        summary="Register a cluster (admins); it is contacted at once",
    )
    def post(self, request: Request) -> Response:
        """An unreachable cluster is registered too: `contact` says why it did not answer."""
        require_admin(request)
        serializer = self.ClusterInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        text = data.get("kubeconfig", "")
        context = data.get("context") or (credentials.default_context(text) if text else "")
        given = cluster_registry.ClusterInput(
            data["name"].strip(),
            data["source"],
            text,
            context,
            data.get("prometheus_url", ""),
            data.get("prometheus_selector", ""),
        )
        cluster = call_service(cluster_registry.save_cluster, data=given)
        return checked(cluster, status=201)


class OneClusterApi(ApiView):
    filter_backends: list[Any] = []

    def cluster(self, pk: int) -> Cluster:
        return get_object_or_404(selectors.cluster_list(), pk=pk)


class ClusterDetailApi(OneClusterApi):
    @extend_schema(tags=TAG, responses=ClusterOutput, summary="Get a cluster")
    def get(self, request: Request, pk: int) -> Response:
        cluster = self.cluster(pk)
        return Response(ClusterOutput(cluster, context={"admin": is_admin(request)}).data)

    @extend_schema(
        tags=TAG,
        request=None,
        responses={200: ClusterOutput},
        examples=[OpenApiExample("Removed", value=CLUSTER_EXAMPLE, response_only=True)],
        summary="Remove a cluster",
    )
    def delete(self, request: Request, pk: int) -> Response:
        """Admins; 409 while a namespace or claim on it is live. Nothing in the cluster is
        deleted; the portal forgets it and its finished requests. Answers what it was."""
        require_admin(request)
        cluster = self.cluster(pk)
        removed = ClusterOutput(cluster, context={"admin": True}).data
        call_service(cluster_registry.remove_cluster, cluster=cluster)
        return Response(removed)


class ClusterCheckApi(OneClusterApi):
    @extend_schema(
        tags=TAG,
        request=None,
        responses=CheckedClusterOutput,
        examples=[CHECKED_EXAMPLE],
        summary="Check a cluster again",
    )
    def post(self, request: Request, pk: int) -> Response:
        """Admins: connect, discover, run the preflight and read the inventory now."""
        require_admin(request)
        return checked(self.cluster(pk))


class DeviceClassListApi(OneClusterApi):
    # A cluster has a handful of classes: one plain list, no pages.
    pagination_class = None

    @extend_schema(
        tags=TAG,
        responses=DeviceClassOutput(many=True),
        summary="List the device classes of a cluster, with how many devices each has",
    )
    def get(self, request: Request, pk: int) -> Response:
        classes = selectors.device_classes(cluster=self.cluster(pk))
        return Response(DeviceClassOutput(classes, many=True).data)


class DeviceListApi(OneClusterApi):
    pagination_class = None

    @extend_schema(
        tags=TAG,
        parameters=[
            OpenApiParameter("device_class", str, description="Only devices of this class."),
            OpenApiParameter("node", str, description="Only devices on this node."),
        ],
        responses=DeviceOutput(many=True),
        summary="List the devices of a cluster (from its ResourceSlices)",
    )
    def get(self, request: Request, pk: int) -> Response:
        cluster = self.cluster(pk)
        devices = cluster.inventory.get("devices", [])
        node = request.query_params.get("node")
        if node:
            devices = [device for device in devices if device.get("node") == node]
        class_name = request.query_params.get("device_class")
        if class_name:
            devices = _of_class(cluster, class_name, devices)
        return Response(DeviceOutput(devices, many=True).data)


def _of_class(cluster: Cluster, class_name: str, devices: list[dict]) -> list[dict]:
    classes = {dc["name"]: dc for dc in cluster.inventory.get("device_classes", [])}
    if class_name not in classes:
        return []
    return [d for d in devices if inventory.matches(classes[class_name]["selectors"], d)]


class MeApi(ApiView):
    filter_backends: list[Any] = []

    @extend_schema(tags=["me"], responses=MeOutput, summary="Who the token belongs to")
    def get(self, request: Request) -> Response:
        user = request.user
        data = {"username": user.get_username(), "is_approver": selectors.user_is_approver(user)}
        return Response(MeOutput(data).data)
