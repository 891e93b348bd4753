"""What the API shows of clusters, their device classes and devices, and of the user asking."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from claims.api import examples
from claims.api.serializers.common import _example
from claims.clusters import registry as cluster_registry
from claims.models import Cluster
from claims.read import selectors


@extend_schema_serializer(examples=_example("GPUs", examples.CLUSTER["device_classes"][0]))
class DeviceClassOutput(serializers.Serializer):
    name = serializers.CharField()
    selectors = serializers.ListField(child=serializers.CharField())
    device_count = serializers.IntegerField()


@extend_schema_serializer(examples=_example("An H100", examples.INVENTORY_DEVICE))
class DeviceOutput(serializers.Serializer):
    node = serializers.CharField(allow_null=True)
    driver = serializers.CharField()
    pool = serializers.CharField()
    name = serializers.CharField()
    attributes = serializers.DictField(child=serializers.JSONField())
    capacity = serializers.DictField(child=serializers.CharField())
    taints = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        required=False,
        help_text="Device taints {key, value, effect, timeAdded}: its driver's and those "
        "DeviceTaintRules add. One with effect NoSchedule or NoExecute keeps the device from "
        "the portal's claims.",
    )


@extend_schema_serializer(examples=_example("A simulated cluster", examples.CLUSTER))
class ClusterOutput(serializers.ModelSerializer):
    """`missing_permissions` and the words of a refusal for admins (context `admin`) only."""

    resource_versions = serializers.ListField(child=serializers.CharField())
    device_classes = serializers.SerializerMethodField()
    reachable = serializers.SerializerMethodField(
        help_text="It answered the portal's last contact (also when it refused the portal's "
        "identity: see refused_since)."
    )
    missing_permissions = serializers.SerializerMethodField(
        help_text="Admins: the permissions the portal needs that the cluster refuses its "
        'identity, e.g. "list resourceslices.resource.k8s.io" ([] to others).'
    )
    last_error = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "simulated",
            "server_version",
            "resource_versions",
            "preferred_resource_version",
            "device_classes",
            "inventory_synced_at",
            "last_synced_at",
            "last_error",
            "reachable",
            "unreachable_since",
            "refused_since",
            "missing_permissions",
        ]

    def _admin(self) -> bool:
        return bool(self.context.get("admin"))

    def get_reachable(self, cluster: Cluster) -> bool:
        return cluster.unreachable_since is None and bool(cluster.server_version)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_missing_permissions(self, cluster: Cluster) -> list[str]:
        return list(cluster.missing_permissions) if self._admin() else []

    def get_last_error(self, cluster: Cluster) -> str:
        if cluster.refused_since and not self._admin():
            return gettext(cluster_registry.NOT_USABLE_YET)
        return cluster.last_error

    @extend_schema_field(DeviceClassOutput(many=True))
    def get_device_classes(self, cluster: Cluster) -> list[dict[str, Any]]:
        return selectors.device_classes(cluster=cluster)


@extend_schema_serializer(examples=_example("A data scientist", examples.ME))
class MeOutput(serializers.Serializer):
    username = serializers.CharField()
    is_approver = serializers.BooleanField()
