"""Pages and API that scale: every list page and API list at 100 and at 10,000 claims, and
reading 10,000 claims through the API against kubectl.

Run: `python -m bench.pages_bench [--small 100] [--large 10000]` with DATABASE_URL set to a
PostgreSQL server (a throw-away test database is created and dropped). Measures, in one run:

- bytes, latency (median and least of 5) and SQL queries of each page of `pages()` with the
  small and the large number of claims (15% pending, as a busy queue; the namespaces of even
  number and their claims are bob's, the others alice's, who is in team "vision"): the queue
  (its first page, and a page filtered by team and device class), the dashboard, a
  namespace's page, the cluster list, a cluster's page, the teams and the audit trail; the
  claim list API (the first numbered page of 50, the second, and the first cursor page), and
  the first page of namespace requests, runs, events and audit events. Served in this process
  through Django's test client, but with templates rendered as a server renders them (not
  instrumented for the test client);
- reading every claim through the API (cursor pages of 1,000, over HTTP on loopback from a
  threaded WSGI server) against `kubectl get resourceclaims -A -o json` reading as many
  claims from kubesim (its own process);
- the idle dashboard poll (an approver's `/?seen=<fingerprint>` from htmx while nothing
  changes, with LIVE_WAIT_SECONDS=0 so it answers 204 at once instead of waiting, which is its
  cost per answer) against a trivial view behind the same middleware and session
  (bench/trivial_urls.py) and `/healthz`, requests per second from 4 client threads on the
  same threaded server, at the large number of claims. With REDIS_URL set (as `make bench`
  does) the poll compares the scope's change counter, as in production.

The readers over HTTP are bench/pages_reading.py. Prints JSON; the ratios (large / small, per
page: bytes, ms, min_ms, queries) are what the issue's targets name.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402
from knox.models import AuthToken  # noqa: E402

from bench.kubesim_bench import claim  # noqa: E402
from bench.pages_reading import (  # noqa: E402
    read_through_api,
    read_through_kubectl,
    requests_per_second,
    serving,
)
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team  # noqa: E402
from claims.read.selectors import APPROVERS_GROUP, dashboard_glance  # noqa: E402

NAMESPACES = 20
PENDING_SHARE = 0.15
IN_USE = 64
SAMPLES = 5


def inventory(nodes: int = 8, per_node: int = 8) -> dict[str, Any]:
    devices = [
        {
            "node": f"gpu-node-{n}",
            "driver": "gpu.nvidia.com",
            "pool": f"gpu-node-{n}",
            "name": f"gpu-{i}",
            "attributes": {"productName": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{n}-{i}"},
            "capacity": {"memory": "81559Mi"},
        }
        for n in range(nodes)
        for i in range(per_node)
    ]
    classes = [{"name": "gpu.nvidia.com", "selectors": ["device.driver == 'gpu.nvidia.com'"]}]
    counts = {"gpu.nvidia.com": len(devices)}
    return {"device_classes": classes, "devices": devices, "device_counts": counts}


def fill(cluster: Cluster, first: int, last: int) -> None:
    """Claims first..last-1 in NAMESPACES namespaces; every 1/PENDING_SHARE-th one pending,
    the others applied (with a manifest): the first IN_USE of them in use with a device each
    (a cluster of 64 GPUs holds no more allocations than that), the rest released."""
    namespaces = list(NamespaceRequest.objects.filter(cluster=cluster).order_by("pk"))
    start = timezone.now()
    every = round(1 / PENDING_SHARE)
    rows = []
    for index in range(first, last):
        ns = namespaces[index % NAMESPACES]
        pending = index % every == 0
        in_use = not pending and index < IN_USE
        rows.append(
            ClaimRequest(
                namespace_request=ns,
                owner=ns.owner,
                name=f"claim-{index:05d}",
                device_class="gpu.nvidia.com",
                count=1,
                purpose="Fine-tuning a model; " * 20,
                state="pending" if pending else "in_use" if in_use else "released",
                applied_manifest=None if pending else claim(f"claim-{index:05d}"),
                allocation=_allocation(index) if in_use else None,
                node=f"gpu-node-{index % 8}" if in_use else "",
                created=start + timedelta(milliseconds=index),
            )
        )
    ClaimRequest.objects.bulk_create(rows, batch_size=2000)


def _allocation(index: int) -> dict[str, Any]:
    node = f"gpu-node-{index % 8}"
    name = f"gpu-{index // 8 % 8}"
    device = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": name}
    return {"node": node, "devices": [device], "reserved_for": []}


def page_costs(client: Client, url: str) -> dict[str, float]:
    """Bytes, median and least latency of SAMPLES (after one warm-up) and SQL queries of one
    page. On a machine shared with other work the least is the steadier of the two: a sample
    only ever grows with the load."""
    client.get(url)
    samples = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
    assert response.status_code == 200, (url, response.status_code)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return {
        "bytes": len(response.content),
        "ms": round(statistics.median(samples) * 1000, 1),
        "min_ms": round(min(samples) * 1000, 1),
        "queries": len(queries.captured_queries),
    }


def pages(cluster: Cluster, team: Team) -> dict[str, str]:
    """Every list page and API list, by name (names starting "api" are read with a token)."""
    first_ns = NamespaceRequest.objects.filter(cluster=cluster).order_by("pk").first()
    assert first_ns is not None
    filtered = f"?kind=claim&team={team.pk}&device_class=gpu.nvidia.com"
    return {
        "approvals": "/approvals/",
        "approvals-filtered": f"/approvals/{filtered}",
        "dashboard": "/",
        "namespace": f"/namespaces/{first_ns.pk}/",
        "clusters": "/clusters/",
        "cluster": f"/clusters/{cluster.pk}/",
        "teams": "/teams/",
        "audit": "/audit/",
        "api-claims": "/api/v1/claims/",
        "api-claims-page-2": "/api/v1/claims/?page=2",
        "api-claims-cursor": "/api/v1/claims/?cursor=",
        "api-namespaces": "/api/v1/namespace-requests/",
        "api-runs": "/api/v1/runs/",
        "api-events": "/api/v1/events/",
        "api-audit": "/api/v1/audit/",
    }


def all_pages(web: Client, api: Client, urls: dict[str, str]) -> dict[str, dict[str, float]]:
    return {
        name: page_costs(api if name.startswith("api") else web, url) for name, url in urls.items()
    }


def idle_dashboard_poll(web: Client, approver: User) -> dict[str, float]:
    """The approver's idle dashboard poll against a trivial view (the same middleware, the
    same signed-in session) and /healthz (answered before any middleware), requests/s."""
    fingerprint = dashboard_glance(user=approver).fingerprint
    session = {"Cookie": f"sessionid={web.cookies['sessionid'].value}", "HX-Request": "true"}
    quick = override_settings(LIVE_WAIT_SECONDS=0, ROOT_URLCONF="bench.trivial_urls")
    with quick, serving() as base:
        requests_per_second(base, "/bench/trivial/", session, 200, seconds=1)  # warm-up
        trivial = requests_per_second(base, "/bench/trivial/", session, 200)
        healthz = requests_per_second(base, "/healthz", {}, 200)
        idle = requests_per_second(base, f"/?seen={fingerprint}", session, 204)
    return {"trivial_view_per_s": trivial, "healthz_per_s": healthz, "idle_dashboard_per_s": idle}


def ratio(value: float, baseline: float) -> float:
    return round(value / baseline, 3) if baseline else float("inf")


def served_as_in_production() -> None:
    """What setup_test_environment gives the bench (the test client's host name, mail kept in
    memory), without its instrumented template rendering: that copies each template's context
    for the test client, a cost per row (per partial) that a served page does not have."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEBUG = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    args = parser.parse_args()
    served_as_in_production()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        print(json.dumps(measure(args.small, args.large), indent=2), flush=True)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def log(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def measure(small: int, large: int) -> dict[str, Any]:
    cluster = Cluster.objects.create(name="bench", simulated=True, inventory=inventory())
    owners = [User.objects.create(username="bob"), User.objects.create(username="alice")]
    team = Team.objects.create(name="vision")
    team.members.add(owners[1])
    approver = User.objects.create(username="charlie")
    approver.groups.add(Group.objects.create(name=APPROVERS_GROUP))
    for n in range(NAMESPACES):
        NamespaceRequest.objects.create(owner=owners[n % 2], cluster=cluster, name=f"team-{n}")
    web, api = Client(), Client()
    web.force_login(approver)
    _, token = AuthToken.objects.create(user=approver, expiry=None)
    api.defaults["HTTP_AUTHORIZATION"] = f"Token {token}"
    urls = pages(cluster, team)
    fill(cluster, 0, small)
    log(f"{small} claims")
    at_small = all_pages(web, api, urls)
    fill(cluster, small, large)
    connection.cursor().execute("ANALYZE")
    log(f"{large} claims")
    at_large = all_pages(web, api, urls)
    log("reading through the API")
    api_seconds = read_through_api(token, large)
    log("reading through kubectl")
    kubectl_seconds = read_through_kubectl(large, NAMESPACES)
    log("idle dashboard poll")
    idle = idle_dashboard_poll(web, approver)
    ratios: dict[str, float] = {}
    for name in urls:
        for what in ("bytes", "ms", "min_ms", "queries"):
            key = f"{name} {what} at {large}/{small}"
            ratios[key] = ratio(at_large[name][what], at_small[name][what])
    ratios[f"kubectl/API seconds to read {large} claims"] = ratio(kubectl_seconds, api_seconds)
    ratios["idle dashboard poll/trivial view requests per second"] = ratio(
        idle["idle_dashboard_per_s"], idle["trivial_view_per_s"]
    )
    ratios["idle dashboard poll/healthz requests per second"] = ratio(
        idle["idle_dashboard_per_s"], idle["healthz_per_s"]
    )
    return {
        "pages": urls,
        f"N={small}": at_small,
        f"N={large}": at_large,
        f"read {large} claims": {
            "api_s": round(api_seconds, 3),
            "kubectl_s": round(kubectl_seconds, 3),
        },
        "idle poll at large": idle,
        "ratios": ratios,
    }


if __name__ == "__main__":
    main()
