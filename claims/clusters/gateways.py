"""One ClusterGateway per cluster connection per process, with the cluster's rate limit
(shared by the portal's processes), and the resource.k8s.io version each cluster speaks
(discovered once, kept on the Cluster row)."""

from __future__ import annotations

import threading

import redis
from django.conf import settings

from claims.clusters import registry as cluster_registry
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from claims.kube.ratelimit import Limiter, SharedTokenBucket
from claims.models import Cluster

_gateways: dict[tuple, ClusterGateway] = {}
_gateways_lock = threading.Lock()


def gateway_for(cluster: Cluster) -> ClusterGateway:
    """One gateway per cluster connection per process (it keeps its HTTP pool and discovery)."""
    key = (
        cluster.pk,
        cluster.kubeconfig_path,
        cluster.context,
        cluster.in_cluster,
        cluster.kubeconfig_encrypted,
    )
    with _gateways_lock:
        if key not in _gateways:
            _gateways[key] = ClusterGateway(
                **cluster_registry.gateway_options(cluster),
                qps=settings.KUBE_CLIENT_QPS,
                burst=settings.KUBE_CLIENT_BURST,
                limiter=_shared_limit(cluster),
            )
        return _gateways[key]


def _shared_limit(cluster: Cluster) -> Limiter | None:
    """The cluster's rate limit, shared by every process of the portal through its Redis
    (KUBE_CLIENT_QPS is the portal's per cluster, however many workers run); None without
    Redis (make run's defaults): each process has the limit of its own."""
    if not settings.REDIS_URL:
        return None
    # Short timeouts: a Redis that does not answer costs the cluster's requests little.
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5
    )
    key = f"gpu-portal:{settings.PORTAL_INSTANCE}:kube-rate:{cluster.pk}"
    return SharedTokenBucket(client, key, settings.KUBE_CLIENT_QPS, settings.KUBE_CLIENT_BURST)


def forget_gateways() -> None:
    with _gateways_lock:
        for gateway in _gateways.values():
            gateway.close()
        _gateways.clear()


def resource_version_of(cluster: Cluster) -> str:
    """The resource.k8s.io version to speak: v1, else v1beta2, else v1beta1 (discovered)."""
    if not cluster.preferred_resource_version:
        info = gateway_for(cluster).discover()
        Cluster.objects.filter(pk=cluster.pk).update(
            server_version=info.server_version,
            resource_versions=info.resource_versions,
            preferred_resource_version=info.preferred_resource_version or "",
        )
        cluster.preferred_resource_version = info.preferred_resource_version or ""
    if not cluster.preferred_resource_version:
        raise PermanentKubeError(f"{cluster} does not serve resource.k8s.io (DRA is off).")
    return cluster.preferred_resource_version
