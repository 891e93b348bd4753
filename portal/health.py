"""/healthz (the process answers) and /readyz (it can do its work), for probes and balancers.

A middleware, first in the chain, answers both before anything looks at the Host header or
redirects to HTTPS: the kubelet probes a Pod's own address over plain HTTP, which
ALLOWED_HOSTS and SECURE_SSL_REDIRECT would otherwise answer with a 400 or a 301 (and a
kubelet counts a 301 as success). Neither needs a login, and neither says more than what
failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from claims.models import Cluster

Check = dict[str, Any]


def database_check() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as e:  # any driver's error means the same: not ready
        return {"ok": False, "error": f"{type(e).__name__}: {e}".strip()}
    return {"ok": True}


def broker_check() -> Check:
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return {"ok": True, "detail": "not Redis: not checked"}
    timeout = settings.READYZ_TIMEOUT_SECONDS
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except redis.RedisError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        client.close()
    return {"ok": True}


def cluster_check(cluster: Cluster) -> Check:
    """Fresh while a cluster loop (manage.py follow_clusters) holds the cluster's lease: it
    alone keeps the pages current with the cluster. A cluster that refuses the portal's
    identity (401/403) is followed but not usable: degraded, not ok."""
    if not cluster.is_followed:
        synced = cluster.last_synced_at.isoformat() if cluster.last_synced_at else "never"
        return {"ok": False, "error": f"no live follower; last synced {synced}"}
    if cluster.refused_since:
        refused = cluster.last_error or "the cluster refuses the portal's identity"
        return {"ok": False, "degraded": True, "follower": cluster.follower, "error": refused}
    return {"ok": True, "follower": cluster.follower}


def clusters_check() -> dict[str, Check]:
    fields = ("name", "follower", "follower_lease_until", "last_synced_at", "refused_since")
    clusters = Cluster.objects.only(*fields, "last_error")
    return {cluster.name: cluster_check(cluster) for cluster in clusters}


OK, DEGRADED, UNAVAILABLE = "ok", "degraded", "unavailable"


def readiness() -> tuple[str, dict[str, Any]]:
    """ok; degraded (it serves, but a cluster refuses the portal: the admin reads why on its
    page, so the Pod stays in its Service); or unavailable."""
    checks: dict[str, Any] = {"database": database_check(), "broker": broker_check()}
    ready = checks["database"]["ok"] and checks["broker"]["ok"]
    degraded = False
    if checks["database"]["ok"] and settings.READYZ_CHECK_FOLLOWERS:
        clusters = checks["clusters"] = clusters_check()
        ready = ready and all(check["ok"] or check.get("degraded") for check in clusters.values())
        degraded = any(check.get("degraded") for check in clusters.values())
    if not ready:
        return UNAVAILABLE, checks
    return (DEGRADED if degraded else OK), checks


def healthz() -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz() -> HttpResponse:
    status, checks = readiness()
    return JsonResponse(
        {"status": status, "checks": checks}, status=503 if status == UNAVAILABLE else 200
    )


ENDPOINTS: dict[str, Callable[[], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz}


def health_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        endpoint = ENDPOINTS.get(request.path_info)
        if endpoint is not None and request.method in ("GET", "HEAD"):
            response = endpoint()
            response["Cache-Control"] = "no-store"
            return response
        return get_response(request)

    return middleware
