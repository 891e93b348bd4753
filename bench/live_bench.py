"""Freshness with many claims followed: a Pod's phase changing in kubesim, to an open run page
in a real browser showing it, and to the API long-poll answering with it.

Run: `python -m bench.live_bench [--followed 10 100 1000] [--samples 15]`. For each number of
followed claims, starts the whole product as bench/flow_bench.py does (kubesim at speed 10, so
a run's Pod lasts about a second, gunicorn, worker, beat, follower, on loopback), then:

- puts that many applied claims (state `waiting`) in the database and their ResourceClaims in
  kubesim, in 10 namespaces, all carrying the portal's labels: the follower caches and syncs
  every one of them on each pass, as it would on a busy cluster;
- for each sample, starts a verification run through the API, opens its page in Chromium
  (Playwright, /usr/bin/chromium) and long-polls it through the API, and times, against the
  moment a watch of its own on kubesim sees the Pod `Running` and `Succeeded`, when the page
  shows that state (a MutationObserver in the page) and when the long-poll answers with it.

Prints JSON: p50/p95/max in ms by N, page and API.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request
from typing import Any

import psycopg
from playwright.sync_api import Page, sync_playwright

from bench.flow_portal import PortalClient
from bench.flow_product import DATABASE, POSTGRES, KubesimAdmin, running_product

SPEED = 10
CHROMIUM = "/usr/bin/chromium"
# As the tests start it: headless, and no background connections this closed network refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NAMESPACES = 10
PASSWORD = "live-bench-password"
FOLLOWED = """
import json
from django.utils import timezone
from claims.read import planned
from claims.worker import cluster_steps
from claims.kube import manifests
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from django.contrib.auth.models import User
user = User.objects.get(username="bench00")
user.set_password({password!r})
user.save()
cluster = Cluster.objects.get()
objects = []
for n in range({namespaces}):
    ns = NamespaceRequest.objects.create(
        owner=user, cluster=cluster, name=f"followed-{{n}}", state="active"
    )
    objects.append(manifests.namespace_manifest(name=ns.name, labels=ns.labels()))
    for i in range({per_namespace}):
        claim = ClaimRequest.objects.create(
            owner=user, namespace_request=ns, name=f"claim-{{i}}", device_class="gpu.nvidia.com",
            count=1, state="waiting", applied_at=timezone.now(), applied_api_version="v1",
        )
        objects.append(planned.claim_manifest(claim, "v1"))
print(json.dumps({{"objects": objects}}))
"""
MARK_STATES = """
window.__seen = {};
const mark = () => {
  for (const state of ["running", "succeeded", "failed"]) {
    if (!window.__seen[state] && document.querySelector("#run-result .state-" + state)) {
      window.__seen[state] = Date.now() / 1000;
    }
  }
};
new MutationObserver(mark).observe(document, {
  subtree: true, childList: true, characterData: true, attributes: true,
});
document.addEventListener("DOMContentLoaded", mark);
"""


def collection(obj: dict[str, Any]) -> str:
    if obj["kind"] == "Namespace":
        return "/api/v1/namespaces"
    namespace = obj["metadata"]["namespace"]
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"


def follow_many(product: Any, admin: KubesimAdmin, count: int) -> None:
    """`count` applied claims in the database and in kubesim; returns once the follower has
    synced after the last of them was created."""
    script = FOLLOWED.format(
        password=PASSWORD, namespaces=NAMESPACES, per_namespace=max(count // NAMESPACES, 0)
    )
    for obj in product.manage("shell", "-c", script)["objects"]:
        admin.call("POST", collection(obj), obj)
    created = time.time()
    deadline = time.monotonic() + 120
    while synced_at(product) < created:
        if time.monotonic() > deadline:
            raise RuntimeError("the follower did not sync the followed claims within 120 s")
        time.sleep(0.2)


def synced_at(product: Any) -> float:
    with psycopg.connect(f"{POSTGRES}/{DATABASE}") as connection:
        row = connection.execute("SELECT max(last_synced_at) FROM claims_cluster").fetchone()
    return row[0].timestamp() if row and row[0] else 0.0


def watch_pods(admin: KubesimAdmin, namespace: str, seen: dict[tuple[str, str], float]) -> None:
    """Record (wall clock) when each Pod of the namespace is first seen in each phase."""
    path = f"/api/v1/namespaces/{namespace}/pods?watch=1&timeoutSeconds=1800"
    request = urllib.request.Request(admin.url + path)
    request.add_header("Authorization", f"Bearer {admin.token}")
    response = urllib.request.urlopen(request, context=admin.context, timeout=1800)

    def read() -> None:
        with response:
            for line in response:
                at = time.time()
                pod = json.loads(line)["object"]
                key = (pod["metadata"]["name"], pod.get("status", {}).get("phase", ""))
                seen.setdefault(key, at)

    threading.Thread(target=read, daemon=True).start()


def long_poll(client: PortalClient, run: int, answers: dict[str, float]) -> None:
    """Follow the run through the API, recording (wall clock) each new state's answer."""
    state = "queued"
    while state not in ("succeeded", "failed"):
        body = client.call("GET", f"/runs/{run}/?wait=30&state={state}").json()
        if body["state"] != state:
            answers.setdefault(body["state"], time.time())
        state = body["state"]


def log_in(page: Page, url: str) -> None:
    page.goto(url + "/accounts/login/")
    page.fill("input[name=username]", "bench00")
    page.fill("input[name=password]", PASSWORD)
    page.press("input[name=password]", "Enter")
    page.wait_for_url(url + "/")


def sample(page: Page, client: PortalClient, claim: int, pods: dict) -> dict[str, dict]:
    """One run: delays (s) from the Pod's phase in kubesim to the page and the API."""
    run = client.call("POST", "/runs/", json={"claim": claim}).json()
    answers: dict[str, float] = {}
    poller = threading.Thread(target=long_poll, args=(client, run["id"], answers))
    poller.start()
    page.goto(f"{client.url.removesuffix('/api/v1')}/runs/{run['id']}/")
    page.wait_for_function("() => window.__seen.succeeded || window.__seen.failed", timeout=60_000)
    shown = page.evaluate("() => window.__seen")
    poller.join(timeout=60)
    delays: dict[str, dict] = {"page": {}, "api": {}}
    for state, phase in (("running", "Running"), ("succeeded", "Succeeded")):
        changed = pods.get((run["pod_name"], phase))
        if changed is None:
            continue
        if state in shown:
            delays["page"][state] = shown[state] - changed
        if state in answers:
            delays["api"][state] = answers[state] - changed
    return delays


def quantiles(values: list[float]) -> dict[str, Any]:
    if len(values) < 2:
        return {"samples": len(values)}
    ms = sorted(v * 1000 for v in values)
    return {
        "samples": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(statistics.quantiles(ms, n=20, method="inclusive")[18], 1),
        "max_ms": round(ms[-1], 1),
    }


def measure(count: int, samples: int) -> dict[str, Any]:
    with running_product(1, keep=False, speed=SPEED) as (product, admin):
        follow_many(product, admin, count)
        client = PortalClient(product.url, product.tokens[0], product.cluster)
        claim = client.claim("live-00")
        pods: dict[tuple[str, str], float] = {}
        watch_pods(admin, "live-00", pods)
        delays: dict[str, dict[str, list[float]]] = {
            where: {"running": [], "succeeded": []} for where in ("page", "api")
        }
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.add_init_script(MARK_STATES)
            log_in(page, product.url)
            for _ in range(samples):
                for where, by_state in sample(page, client, claim, pods).items():
                    for state, delay in by_state.items():
                        delays[where][state].append(delay)
            browser.close()
    return {
        where: {state: quantiles(values) for state, values in by_state.items()}
        for where, by_state in delays.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--followed", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    report = {f"N={count}": measure(count, args.samples) for count in args.followed}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
