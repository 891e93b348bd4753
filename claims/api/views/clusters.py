"""Clusters as the portal last saw them: versions, device classes, devices; and who am I."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from claims import inventory, selectors
from claims.api.filters import StrictFilterSet, TextFilter, TrueFalseFilter
from claims.api.serializers import ClusterOutput, DeviceClassOutput, DeviceOutput, MeOutput
from claims.api.views.base import ApiView
from claims.models import Cluster

TAG = ["clusters"]


class ClusterFilter(StrictFilterSet):
    name = TextFilter()
    simulated = TrueFalseFilter()

    class Meta:
        model = Cluster
        fields = ["name", "simulated"]


class ClusterListApi(ApiView):
    model = Cluster
    list_selector = staticmethod(lambda *, user: selectors.cluster_list())
    filterset_class = ClusterFilter
    ordering_fields = ["name", "created"]

    @extend_schema(tags=TAG, responses=ClusterOutput(many=True), summary="List clusters")
    def get(self, request: Request) -> Response:
        return self.list_response(ClusterOutput)


class ClusterDetailApi(ApiView):
    filter_backends: list[Any] = []

    @extend_schema(tags=TAG, responses=ClusterOutput, summary="Get a cluster")
    def get(self, request: Request, pk: int) -> Response:
        cluster = self.cluster(pk)
        return Response(ClusterOutput(cluster).data)

    def cluster(self, pk: int) -> Cluster:
        return get_object_or_404(selectors.cluster_list(), pk=pk)


class DeviceClassListApi(ClusterDetailApi):
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


class DeviceListApi(ClusterDetailApi):
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
