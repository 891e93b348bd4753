"""Prometheus metrics: /metrics behind its bearer token, requests, Celery tasks in a real
worker, the queue in Redis, claims and devices from a claim flow against kubesim, and the
Kubernetes API calls and watch restarts, checked against kubesim's own request counters."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from celery import Celery
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client import Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

import kubesim
from claims.kube import pod_parsing
from claims.kube.gateway import ClusterGateway
from claims.kube.informer import Informer
from claims.models import NamespaceRequest
from claims.read import device_matching
from portal import metrics
from portal.request_id import request_id
from tests.claims.read.test_gpu_map import *  # noqa: F403 (the map cluster's fixtures)
from tests.claims.read.test_gpu_map import held_by_a_stuck_pod
from tests.fixtures.kubesim import create_namespace
from tests.fixtures.portal import TEST_REDIS_URL, _celery_env, _start, _stop, wait_until
from tests.oidc_provider.fixture import free_port

TOKEN = "scrape-token-for-tests"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def scrape(settings: Any, client: Client, db: None) -> Callable[[], Samples]:
    settings.METRICS_TOKEN = TOKEN

    def get() -> Samples:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content
        return parse(response.content.decode())

    return get


@pytest.mark.django_db
def test_it_serves_metrics_only_with_the_bearer_token(client: Client, settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404  # no token set: nothing to scrape
    settings.METRICS_TOKEN = TOKEN
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-it").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    # Prometheus scrapes the Pod's address, which ALLOWED_HOSTS does not list.
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", HTTP_HOST="10.0.3.7")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/plain; version=")


def test_it_counts_requests_by_view_method_and_status(
    scrape: Callable[[], Samples], client: Client, alice: User
) -> None:
    before = scrape()
    client.get("/accounts/login/")
    client.get("/accounts/login/")
    client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    client.force_login(alice)
    client.get("/namespaces/999999/")
    client.generic("BREW", "/accounts/login/")
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("portal_http_requests_total", view="login", method="GET", status="200") == 2
    assert delta("portal_http_requests_total", view="login", method="POST", status="200") == 1
    assert delta("portal_http_requests_total", view="namespace", method="GET", status="404") == 1
    assert delta("portal_http_requests_total", view="login", method="other", status="405") == 1
    seconds = ("portal_http_request_duration_seconds_count",)
    assert delta(*seconds, view="login", method="GET", status="200") == 2
    assert (
        delta("portal_http_request_duration_seconds_sum", view="login", method="GET", status="200")
        > 0
    )


def test_it_reports_claims_by_state_devices_and_api_calls_of_a_claim_flow(
    scrape: Callable[[], Samples],
    alice: User,
    namespace_of: Callable[[User], NamespaceRequest],
    map_kubesim: kubesim.Handle,
) -> None:
    before = scrape()
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1)
    after = scrape()
    claim.refresh_from_db()
    assert value(after, "portal_claims", state=claim.state) == 1
    assert value(after, "portal_namespaces", state="active") == 1
    assert value(after, "portal_claims", state="released") == 0  # every state is reported
    cluster = claim.namespace_request.cluster
    devices = len(device_matching.matching_ids(cluster.inventory, claim.device_class, ""))
    where = {"cluster": cluster.name, "device_class": claim.device_class}
    assert devices > 1
    assert value(after, "portal_devices", **where, state="held") == 1
    assert value(after, "portal_devices", **where, state="free") == devices - 1
    created = {"verb": "create", "resource": "resourceclaims", "code": "201"}
    made = value(after, "portal_kube_api_requests_total", **created)
    assert made - value(before, "portal_kube_api_requests_total", **created) == 1


@pytest.fixture
def gateway(kubesim_private: kubesim.Handle) -> Iterator[ClusterGateway]:
    with ClusterGateway(kubesim_private.kubeconfig, qps=100, burst=100) as gateway:
        yield gateway


def restarts_of(samples: Samples, kind: str) -> float:
    return sum(
        found
        for (name, labels), found in samples.items()
        if name == "portal_kube_watch_restarts_total" and ("kind", kind) in labels
    )


def test_it_counts_api_calls_as_the_server_saw_them_and_watch_restarts(
    scrape: Callable[[], Samples], kubesim_private: kubesim.Handle, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_private)
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    before = scrape()
    informer = Informer(gateway, "Pod", "", pod_parsing.pod_state, lambda: None, watch_seconds=1)
    informer.start()
    try:
        ended = ("portal_kube_watch_restarts_total",)
        wait_until(lambda: value(scrape(), *ended, kind="Pod", reason="ended") >= 1, timeout=30)
        # A change the informer never sees, then compaction: its version is gone (410).
        kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/pods", "watch": "drop"})
        # The watch open before the fault ends, then one the fault drops: none is open now.
        restarts = restarts_of(scrape(), "Pod")
        wait_until(lambda: restarts_of(scrape(), "Pod") >= restarts + 2, timeout=30)
        gateway.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }
        )
        kubesim_private.admin("POST", "/_kubesim/compact")
        kubesim_private.admin("DELETE", "/_kubesim/faults")
        wait_until(lambda: value(scrape(), *ended, kind="Pod", reason="expired") >= 1, timeout=30)
        # The restart is counted before the list that follows it.
        wait_until(lambda: informer.lists >= 2, timeout=30)
    finally:
        informer.stop()
        informer.thread.join(timeout=30)
    after = scrape()
    seen = kubesim_private.admin("GET", "/_kubesim/counters")["requests"]

    def delta(verb: str, resource: str) -> float:
        labels = {"verb": verb, "resource": resource, "code": "200"}
        return value(after, "portal_kube_api_requests_total", **labels) - value(
            before, "portal_kube_api_requests_total", **labels
        )

    assert delta("list", "pods") == seen["list pods"] >= 2  # listed again after the 410
    assert delta("watch", "pods") == seen["watch pods"] >= 2
    assert informer.lists == 2
    assert (
        value(after, "portal_kube_api_requests_total", verb="create", resource="pods", code="201")
        >= 1
    )


def test_it_reports_the_length_of_the_celery_queue(
    scrape: Callable[[], Samples], settings: Any
) -> None:
    queue = f"metrics-test-{uuid.uuid4().hex[:8]}"
    settings.CELERY_BROKER_URL = TEST_REDIS_URL
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    producer = Celery("metrics-test", broker=TEST_REDIS_URL)
    try:
        assert value(scrape(), "portal_celery_queue_length", queue=queue) == 0
        for _ in range(3):
            producer.send_task("claims.worker.tasks.reconcile", queue=queue)
        assert value(scrape(), "portal_celery_queue_length", queue=queue) == 3
    finally:
        producer.close()
        redis.Redis.from_url(TEST_REDIS_URL).delete(queue)


@pytest.fixture
def metrics_worker(tmp_path: Path, transactional_db: None) -> Iterator[tuple[str, int]]:
    """A real worker of its own queue, serving its metrics on a port of its own."""
    queue, port = f"metrics-test-{uuid.uuid4().hex[:8]}", free_port()
    extra = {"CELERY_QUEUE": queue, "METRICS_PORT": str(port), "METRICS_TOKEN": TOKEN}
    env = _celery_env(extra)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    args = ["worker", "-Q", queue, "-P", "threads", "-c", "2", "-l", "info"]
    args += ["-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    worker = _start(args, tmp_path / "worker.log", env)
    try:
        yield queue, port
    finally:
        _stop(worker)
        redis.Redis.from_url(TEST_REDIS_URL).delete(queue)


def worker_metrics(port: int, token: str = TOKEN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return requests.get(f"http://127.0.0.1:{port}/metrics", headers=headers, timeout=5)


def test_it_times_the_tasks_of_a_real_worker_and_counts_their_failures(
    metrics_worker: tuple[str, int], tmp_path: Path
) -> None:
    queue, port = metrics_worker

    def serving() -> bool:
        try:
            return worker_metrics(port).status_code == 200
        except requests.ConnectionError:
            return False

    wait_until(serving, timeout=60)
    assert worker_metrics(port, token="wrong").status_code == 401
    producer = Celery("metrics-test", broker=TEST_REDIS_URL)
    sent_in = request_id.set("rid-of-the-request-that-sent-it")  # as a web request would
    try:
        producer.send_task("claims.worker.tasks.reconcile", queue=queue)
        producer.send_task("claims.worker.tasks.reconcile", args=["unexpected"], queue=queue)
    finally:
        request_id.reset(sent_in)
        producer.close()
    task = "claims.worker.tasks.reconcile"

    def reported() -> Samples | None:
        samples = parse(worker_metrics(port).text)
        done = value(
            samples, "portal_celery_task_duration_seconds_count", task=task, state="SUCCESS"
        )
        failed = value(
            samples, "portal_celery_task_failures_total", task=task, exception="TypeError"
        )
        return samples if done >= 1 and failed >= 1 else None

    samples = wait_until(reported, timeout=60)
    assert (
        value(samples, "portal_celery_task_duration_seconds_count", task=task, state="FAILURE") == 1
    )
    # A worker reports its own process only: the installation's figures come from the web.
    assert not any(name == "portal_claims" for name, _ in samples)
    # Its log goes through the portal's LOGGING: JSON lines in production.
    lines = (tmp_path / "worker.log").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    succeeded = [
        r for r in records if r["logger"] == "celery.app.trace" and "succeeded" in r["message"]
    ]
    # With the id of the request that sent the task, so its lines join that request's.
    assert succeeded and {r["request_id"] for r in succeeded} == {"rid-of-the-request-that-sent-it"}


def test_it_keeps_the_waits_of_live_pages_apart_from_the_pages(
    scrape: Callable[[], Samples], client: Client, alice: User
) -> None:
    client.force_login(alice)
    before = scrape()
    client.get("/")
    client.get("/?seen=0")
    after = scrape()
    name = "portal_http_requests_total"
    page = {"view": "dashboard", "method": "GET"}
    grew = {
        labels: after[(n, labels)] - before.get((n, labels), 0.0)
        for (n, labels) in after
        if n == name and dict(labels)["view"].startswith("dashboard")
    }
    assert sum(grew.values()) == 2
    assert sum(v for labels, v in grew.items() if dict(labels)["view"] == "dashboard:wait") == 1
    assert value(after, name, **page, status="200") - value(before, name, **page, status="200") == 1


DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "portal-dashboard.json"


def declared_in_code() -> set[str]:
    """The sample names of the counters and histograms portal/metrics.py declares."""
    names: set[str] = set()
    for metric in vars(metrics).values():
        if isinstance(metric, Counter):
            names.add(f"{metric._name}_total")
        elif isinstance(metric, Histogram):
            names |= {f"{metric._name}{suffix}" for suffix in ("_bucket", "_sum", "_count")}
    return names


def test_it_draws_the_dashboard_from_metrics_the_portal_exports(
    scrape: Callable[[], Samples], cluster: Any
) -> None:
    exported = {name for name, _ in scrape()} | declared_in_code()
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\bportal_[a-z_]+", expr)}
    assert len(panels) >= 10
    assert {"portal_claims", "portal_devices", "portal_celery_queue_length"} <= used
    assert used <= exported, used - exported


COUNT_CALLS = """
import sys, django
django.setup()
from portal import metrics
from portal.request_id import request_id
for _ in range(int(sys.argv[1])):
    metrics.observe_kube_call("GET", "https://k/api/v1/namespaces/a/pods/p", 200)
"""
EXPOSE = """
import django
django.setup()
from portal import metrics
from portal.request_id import request_id
print(metrics.exposition(with_installation=False).decode())
"""


def test_it_adds_up_the_processes_of_a_pod_in_multiprocess_mode(tmp_path: Path) -> None:
    """Gunicorn's processes (PROMETHEUS_MULTIPROC_DIR): any of them answers for all."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "SECRET_KEY": "x" * 50}
    env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    root = Path(__file__).resolve().parents[2]
    for calls in ("3", "2"):
        subprocess.run([sys.executable, "-c", COUNT_CALLS, calls], env=env, cwd=root, check=True)
    shown = subprocess.run(
        [sys.executable, "-c", EXPOSE], env=env, cwd=root, check=True, capture_output=True
    )
    labels = {"verb": "get", "resource": "pods", "code": "200"}
    assert value(parse(shown.stdout.decode()), "portal_kube_api_requests_total", **labels) == 5
