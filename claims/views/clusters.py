"""The clusters the portal knows: version, served DRA APIs, device classes, inventory."""

from __future__ import annotations

import re
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render

from claims import selectors
from claims.models import Cluster
from claims.views.common import HtmxHttpRequest, login_required

MIN_DRA_VERSION = (1, 33)
NVIDIA_DRIVER = "gpu.nvidia.com"


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


def preflight_from_sync(cluster: Cluster) -> list[dict[str, Any]]:
    """The seed's prerequisites, judged from what the last sync saw."""
    if not cluster.server_version:
        return []
    version = _major_minor(cluster.server_version)
    devices = [d for d in cluster.inventory.get("devices", []) if d["driver"] == NVIDIA_DRIVER]
    return [
        _check(
            "Kubernetes 1.33 or newer",
            version >= MIN_DRA_VERSION,
            f"server {cluster.server_version}",
        ),
        _check(
            "DRA API (resource.k8s.io) served",
            bool(cluster.resource_versions),
            ", ".join(cluster.resource_versions) or "not served",
        ),
        _check(
            "NVIDIA device class installed",
            NVIDIA_DRIVER in cluster.device_class_names(),
            f"DeviceClass {NVIDIA_DRIVER}",
        ),
        _check(
            "GPUs published by the NVIDIA DRA driver",
            bool(devices),
            f"{len(devices)} device(s) in ResourceSlices",
        ),
    ]


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail}


def _major_minor(server_version: str) -> tuple[int, int]:
    match = re.match(r"v?(\d+)\.(\d+)", server_version)
    return (int(match[1]), int(match[2])) if match else (0, 0)
