"""Prometheus metrics of the portal (prometheus-client).

Web processes answer GET /metrics; workers and followers serve the same text on METRICS_PORT
(their own process's metrics: tasks, API calls, watch restarts). Either needs the bearer token
METRICS_TOKEN: without one set there is nothing to scrape (404, no port). The figures that
describe the whole installation (queue length, claims by state, devices held and free) are
read at scrape time from Redis and the database, by the web processes only, so that every
worker does not report them again.

Under gunicorn set PROMETHEUS_MULTIPROC_DIR (an empty directory per Pod, before start): the
workers write their counters there and any of them answers for all (docs/operations.md).
"""

from __future__ import annotations

import hmac
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis
from celery import signals as celery_signals
from django.conf import settings
from django.core.signals import got_request_exception
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from claims.kube import connection, informer
from portal.logfilters import LIVE_WAIT

log = logging.getLogger(__name__)
HTTP_REQUESTS = Counter(
    "portal_http_requests", "HTTP requests answered", ["view", "method", "status"]
)
HTTP_LATENCY = Histogram(
    "portal_http_request_duration_seconds",
    "Time to answer an HTTP request (live pages and long-polls wait up to LIVE_WAIT_SECONDS)",
    ["view", "method", "status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
HTTP_EXCEPTIONS = Counter(
    "portal_http_exceptions", "Requests that ended in an unhandled exception", ["exception"]
)
TASK_LATENCY = Histogram(
    "portal_celery_task_duration_seconds",
    "Time a Celery task ran, by its end state",
    ["task", "state"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
TASK_FAILURES = Counter(
    "portal_celery_task_failures", "Celery tasks that raised", ["task", "exception"]
)
KUBE_REQUESTS = Counter(
    "portal_kube_api_requests",
    "Requests to Kubernetes API servers (code 0: no answer)",
    ["verb", "resource", "code"],
)
# kombu's Redis transport keeps priorities 1-9 in lists named "<queue>\x06\x16<priority>".
PRIORITY_SEP = "\x06\x16"
WATCH_RESTARTS = Counter(
    "portal_kube_watch_restarts",
    "Watches started again: ended (server timeout), expired (410, relisted) or error",
    ["kind", "reason"],
)


# --- HTTP -------------------------------------------------------------------------------


def authorized(header: str) -> bool:
    scheme, _, token = header.partition(" ")
    expected = settings.METRICS_TOKEN
    return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), expected.encode())


def exposition(*, with_installation: bool) -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    text = generate_latest(registry)
    if with_installation:
        installation = CollectorRegistry()
        installation.register(InstallationCollector())
        text += generate_latest(installation)
    return text


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_TOKEN:
        return HttpResponse("Not found\n", status=404, content_type="text/plain")
    if not authorized(request.headers.get("Authorization", "")):
        response = HttpResponse("Unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(exposition(with_installation=True), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


# Any other method counts as "other": a label value per made-up method would grow forever.
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))


def view_name(request: HttpRequest) -> str:
    """The URL's name; ":wait" marks a live page's or long-poll's wait for a change, whose
    time is the wait (logfilters.LIVE_WAIT), so it stays apart from the pages' own."""
    match = getattr(request, "resolver_match", None)
    name = match.view_name if match is not None and match.view_name else "<unresolved>"
    query = request.META.get("QUERY_STRING", "")
    return f"{name}:wait" if query and LIVE_WAIT.search("?" + query) else name


def metrics_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Answers /metrics before the Host check (Prometheus scrapes Pod addresses), and times
    every other request."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.path_info == "/metrics" and request.method in ("GET", "HEAD"):
            return metrics_view(request)
        started = time.perf_counter()
        response = get_response(request)
        method = request.method if request.method in METHODS else "other"
        labels = (view_name(request), method, str(response.status_code))
        HTTP_LATENCY.labels(*labels).observe(time.perf_counter() - started)
        HTTP_REQUESTS.labels(*labels).inc()
        return response

    return middleware


def _request_exception(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    error = sys.exc_info()[1]
    HTTP_EXCEPTIONS.labels(type(error).__name__ if error else "unknown").inc()


got_request_exception.connect(_request_exception, dispatch_uid="portal.metrics.exceptions")


# --- Kubernetes API calls and watches (plain callbacks: claims.kube knows no Django) -----


def kube_verb(method: str, parts: list[str], query: dict[str, list[str]]) -> str:
    method = method.upper()
    if method == "GET":
        if query.get("watch", [""])[0] in ("true", "1"):
            return "watch"
        return "get" if _has_name(parts) else "list"
    if method == "DELETE" and not _has_name(parts):
        return "deletecollection"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    return verbs.get(method, method.lower())


def _resource_parts(path: str) -> list[str] | None:
    """What follows /api/v1 or /apis/<group>/<version>; None for discovery and the like."""
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        return parts[2:] or None
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[3:] or None
    return None


def _has_name(parts: list[str]) -> bool:
    if parts[0] == "namespaces" and len(parts) >= 3:
        return len(parts) >= 4
    return len(parts) >= 2


def kube_resource(parts: list[str]) -> str:
    """pods, pods/log, namespaces, resourceclaims ... from the resource part of a path."""
    if parts[0] == "namespaces" and len(parts) >= 3:
        parts = parts[2:]
    return "/".join([parts[0], *parts[2:3]])


def observe_kube_call(method: str, url: str, status: int) -> None:
    split = urlsplit(url)
    parts = _resource_parts(split.path)
    if parts is None:
        verb, resource = method.lower(), "discovery"
    else:
        verb, resource = kube_verb(method, parts, parse_qs(split.query)), kube_resource(parts)
    KUBE_REQUESTS.labels(verb, resource, str(status)).inc()


def observe_watch_restart(kind: str, reason: str) -> None:
    WATCH_RESTARTS.labels(kind, reason).inc()


if observe_kube_call not in connection.call_observers:
    connection.call_observers.append(observe_kube_call)
if observe_watch_restart not in informer.restart_observers:
    informer.restart_observers.append(observe_watch_restart)


# --- Celery (connected in portal/celery.py) -------------------------------------------

_task_started: dict[str, float] = {}
_task_lock = threading.Lock()


def task_prerun(task_id: str = "", **kwargs: Any) -> None:
    with _task_lock:
        _task_started[task_id] = time.perf_counter()


def task_postrun(task_id: str = "", task: Any = None, state: str = "", **kwargs: Any) -> None:
    with _task_lock:
        started = _task_started.pop(task_id, None)
    if started is not None:
        name = getattr(task, "name", "unknown")
        TASK_LATENCY.labels(name, state or "UNKNOWN").observe(time.perf_counter() - started)


def task_failure(sender: Any = None, exception: BaseException | None = None, **kwargs: Any) -> None:
    name = getattr(sender, "name", "unknown")
    TASK_FAILURES.labels(name, type(exception).__name__ if exception else "unknown").inc()


# --- Installation-wide figures, read at scrape time ---------------------------------------


def queue_length() -> GaugeMetricFamily:
    """Messages waiting in the Celery queue (Redis lists: the queue and its priority lists)."""
    family = GaugeMetricFamily(
        "portal_celery_queue_length", "Tasks waiting in the Celery queue", labels=["queue"]
    )
    url, queue = settings.CELERY_BROKER_URL, settings.CELERY_TASK_DEFAULT_QUEUE
    if not url.startswith(("redis://", "rediss://")):
        return family
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        names = [queue, *(f"{queue}{PRIORITY_SEP}{p}" for p in (1, 2, 3, 4, 5, 6, 7, 8, 9))]
        pipe = client.pipeline()
        for name in names:
            pipe.llen(name)
        family.add_metric([queue], sum(pipe.execute()))
    except redis.RedisError:
        pass  # no figure rather than a failed scrape; /readyz says the broker is down
    finally:
        client.close()
    return family


def requests_by_state() -> Iterator[GaugeMetricFamily]:
    from django.db.models import Count

    from claims.models import ClaimRequest, NamespaceRequest

    for model, name in ((ClaimRequest, "claims"), (NamespaceRequest, "namespaces")):
        family = GaugeMetricFamily(
            f"portal_{name}", f"{name.capitalize()} requests by state", labels=["state"]
        )
        counts = dict(model.objects.values_list("state").annotate(n=Count("pk")).order_by())
        for state in model.State.values:
            family.add_metric([state], counts.get(state, 0))
        yield family


def devices() -> GaugeMetricFamily:
    """Devices of each class per cluster, held by a claim's allocation or free."""
    from claims.models import ClaimRequest, Cluster
    from claims.read import device_matching, gpu_map

    family = GaugeMetricFamily(
        "portal_devices",
        "Devices per cluster and class",
        labels=["cluster", "device_class", "state"],
    )
    for cluster in Cluster.objects.only("name", "inventory"):
        allocations = ClaimRequest.objects.filter(
            namespace_request__cluster=cluster, allocation__isnull=False
        ).values_list("allocation", flat=True)
        held = set().union(*(gpu_map.allocated_ids(a) for a in allocations))
        for device_class in cluster.device_class_names():
            ids = device_matching.matching_ids(cluster.inventory, device_class, "")
            taken = len(ids & held)
            family.add_metric([cluster.name, device_class, "held"], taken)
            family.add_metric([cluster.name, device_class, "free"], len(ids) - taken)
    return family


class InstallationCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield queue_length()
        try:
            families = [*requests_by_state(), devices()]
        except DatabaseError as e:  # the process's own metrics still go out; /readyz says why
            log.warning("metrics without the database's figures: %s", e)
            return
        yield from families


# --- The port of workers and followers ------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


def _metrics_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    if environ.get("PATH_INFO") != "/metrics":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return iter([b"Not found\n"])
    if not authorized(environ.get("HTTP_AUTHORIZATION", "")):
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Bearer realm="metrics"')])
        return iter([b"Unauthorized\n"])
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
    return iter([exposition(with_installation=False)])


def serve_for_process() -> WSGIServer | None:
    """This process's metrics on METRICS_PORT (a worker, a follower); nothing unless both the
    port and the token are set."""
    port = settings.METRICS_PORT
    if not port or not settings.METRICS_TOKEN:
        return None
    server = make_server("", port, _metrics_app, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def connect_celery() -> None:
    """Task metrics, and this worker's port (called by portal/celery.py as the worker starts)."""
    celery_signals.task_prerun.connect(task_prerun, weak=False)
    celery_signals.task_postrun.connect(task_postrun, weak=False)
    celery_signals.task_failure.connect(task_failure, weak=False)
    serve_for_process()
