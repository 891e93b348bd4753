"""The clusters the portal knows: version, served DRA APIs, device classes, inventory."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render

from claims import selectors
from claims.kube import preflight
from claims.kube.parsing import ClusterInfo, DeviceClassInfo, DeviceInfo, PreflightCheck
from claims.models import Cluster
from claims.views.common import HtmxHttpRequest, login_required


@login_required
def cluster_list(request: HtmxHttpRequest) -> HttpResponse:
    context = {"nav": "clusters", "clusters": selectors.cluster_list()}
    return render(request, "claims/cluster_list.html", context)


@login_required
def cluster_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    cluster = selectors.cluster_list().filter(pk=pk).first()
    if cluster is None:
        raise Http404
    device_classes = [
        {**dc, "count": dc["device_count"]} for dc in selectors.device_classes(cluster=cluster)
    ]
    context = {
        "nav": "clusters",
        "cluster": cluster,
        "device_classes": device_classes,
        "preflight": cluster.inventory.get("preflight") or preflight_from_sync(cluster),
    }
    return render(request, "claims/cluster_detail.html", context)


def preflight_from_sync(cluster: Cluster) -> list[PreflightCheck]:
    """The seed's prerequisites, judged by the gateway's rules from what the last sync saw."""
    if not cluster.server_version:
        return []
    info = ClusterInfo(
        cluster.server_version,
        cluster.resource_versions,
        cluster.preferred_resource_version or None,
    )
    checks = [preflight.check_server_version(info), preflight.check_dra_served(info)]
    if not info.preferred_resource_version:
        return checks + preflight.skipped_without_dra()
    classes = [DeviceClassInfo(**dc) for dc in cluster.inventory.get("device_classes", [])]
    devices = [DeviceInfo(**device) for device in cluster.inventory.get("devices", [])]
    nodes = sorted({device.node for device in devices if device.node})
    return [
        *checks,
        preflight.check_device_classes(classes),
        preflight.check_gpu_devices(devices),
        preflight.check_gpu_nodes(devices, nodes),
    ]
