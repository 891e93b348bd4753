"""What following N claims costs a cluster while nothing changes, as shipped.

Run: `python -m bench.idle_bench [--sizes 10,1000] [--seconds 310]` with DATABASE_URL set to a
PostgreSQL server (a throw-away test database is created and dropped). Starts kubesim in this
process and applies N claims for real through the portal's own steps, ten to a namespace, each
namespace with its ResourceQuota and its user's ServiceAccount and RoleBinding. Then, for each
N, runs what `make run` runs against a cluster, with the shipped settings (the client's rate
limit, RECONCILE_INTERVAL_SECONDS, ORPHAN_SWEEP_INTERVAL_SECONDS, INVENTORY_REFRESH_SECONDS):

- the cluster loop of `manage.py follow_clusters` (its informers, its passes, the reconciler's
  drift checks on its resync timer, the orphan sweep, discovery, the lease);
- beat's reconciler (claims.worker.tasks.reconcile, every RECONCILE_INTERVAL_SECONDS);

and measures, over `seconds` of idle time once the loop's caches are current (by default
long enough that each watch is resumed once), the requests and the response bytes the
portal's gateway read from the cluster (watch streams included), per minute. The baseline
is a naive per-object poller (one GET of each claim every 5 s), measured over one round and
scaled to a minute. Prints JSON with the ratios the issue names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.test import override_settings  # noqa: E402

import kubesim  # noqa: E402
from bench.follow_bench import Metered  # noqa: E402
from claims.clusters import gateways  # noqa: E402
from claims.domain import access  # noqa: E402
from claims.models import ClaimRequest, Cluster, NamespaceRequest  # noqa: E402
from claims.worker import cluster_loop, cluster_steps, reconciler, sync  # noqa: E402
from portal.celery import app as celery_app  # noqa: E402

CLAIMS_PER_NAMESPACE = 10


def log(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def add_claims(cluster: Cluster, owner: User, first: int, last: int) -> None:
    """Claims first..last-1 applied for real, ten to a namespace, each namespace with its
    quota and its owner's access, through the steps the worker runs (no limit on the client
    while setting up: that is not what is measured)."""
    with override_settings(KUBE_CLIENT_QPS=0):
        gateways.forget_gateways()
        namespaces: dict[int, NamespaceRequest] = {}
        for index in range(first, last):
            group = index // CLAIMS_PER_NAMESPACE
            if group not in namespaces:
                namespaces[group] = NamespaceRequest.objects.create(
                    owner=owner, cluster=cluster, name=f"idle-{group:04d}", state="approved"
                )
            claim = ClaimRequest.objects.create(
                namespace_request=namespaces[group],
                owner=owner,
                name=f"claim-{index:05d}",
                device_class="gpu.nvidia.com",
                count=1,
                state="approved",
            )
            cluster_steps.apply_claim(ClaimRequest.objects.get(pk=claim.pk))
        for ns in namespaces.values():
            access.grant_access(NamespaceRequest.objects.get(pk=ns.pk))
        gateways.forget_gateways()
    followed = ClaimRequest.objects.filter(state__in=sync.FOLLOWED_CLAIMS).count()
    assert followed == last, f"{followed} of {last} claims applied"


def per_minute(counts: Counter[str], seconds: float) -> dict[str, float]:
    return {key: round(counts[key] * 60 / seconds, 1) for key in ("requests", "bytes")}


def shipped_idle(cluster: Cluster, seconds: float) -> dict[str, Any]:
    """The cluster loop and beat's reconciler, idle, as shipped: what the gateway reads."""
    gateway = gateways.gateway_for(cluster)  # the one the loop takes: shipped rate limit
    meter = Metered(gateway)
    stop = threading.Event()
    loop = cluster_loop.ClusterLoop(cluster.pk, stop)
    loop_thread = threading.Thread(target=loop.run, daemon=True)

    def beat() -> None:
        while not stop.wait(settings.RECONCILE_INTERVAL_SECONDS):
            reconciler.reconcile()
        connections.close_all()  # this thread's

    beat_thread = threading.Thread(target=beat, daemon=True)
    loop_thread.start()
    beat_thread.start()
    try:
        started = time.monotonic()
        while not loop._current():
            time.sleep(0.05)
        first = {"seconds": round(time.monotonic() - started, 2), **meter.counts}
        assert loop.watched is not None
        informers = loop.watched.all()
        meter.reset()
        checks, sweeps = loop.checks, loop.sweeps
        time.sleep(seconds)  # idle: nothing changes in the cluster meanwhile
        return {
            "first-lists": first,
            "idle-per-minute": per_minute(meter.counts, seconds),
            "drift-checks": loop.checks - checks,
            "orphan-sweeps": loop.sweeps - sweeps,
            "lists-after-start": sum(informer.lists for informer in informers) - len(informers),
        }
    finally:
        stop.set()
        loop.wake.set()
        loop_thread.join(timeout=30)
        beat_thread.join(timeout=30)
        gateways.forget_gateways()


def naive_poller(cluster: Cluster) -> dict[str, float]:
    """One GET of each followed claim, one round, scaled to a round every 5 s."""
    with override_settings(KUBE_CLIENT_QPS=0):
        gateways.forget_gateways()
        gateway = gateways.gateway_for(cluster)
        meter = Metered(gateway)
        for claim in ClaimRequest.objects.select_related("namespace_request"):
            gateway.read(claim.applied_api_version, "ResourceClaim", claim.namespace, claim.name)
        gateways.forget_gateways()
    return {key: round(meter.counts[key] * 60 / 5, 1) for key in ("requests", "bytes")}


def measure(sizes: list[int], seconds: float) -> dict[str, Any]:
    handle = kubesim.start()
    try:
        cluster = Cluster.objects.create(
            name="idle", kubeconfig_path=handle.kubeconfig, simulated=True
        )
        sync.refresh_inventory(cluster)
        owner = User.objects.create(username="alice")
        results: dict[str, Any] = {"seconds": seconds, "sizes": {}}
        have = 0
        for size in sizes:
            log(f"applying claims {have}..{size}")
            add_claims(cluster, owner, have, size)
            have = size
            log(f"{size} claims: the loop, idle for {seconds} s")
            shipped = shipped_idle(cluster, seconds)
            naive = naive_poller(cluster)
            results["sizes"][size] = {"shipped": shipped, "naive-5s-per-minute": naive}
        small, large = (results["sizes"][size] for size in (sizes[0], sizes[-1]))
        idle_small, idle_large = (s["shipped"]["idle-per-minute"] for s in (small, large))
        results["ratios"] = {
            "idle bytes, largest N / smallest N (target <= 1.2)": round(
                idle_large["bytes"] / max(idle_small["bytes"], 1), 3
            ),
            "idle bytes at largest N / naive 5 s poller (target <= 0.01)": round(
                idle_large["bytes"] / large["naive-5s-per-minute"]["bytes"], 5
            ),
        }
        return results
    finally:
        handle.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,1000")
    # Long enough that every watch is resumed once (FOLLOWER_WATCH_SECONDS, 300 s).
    parser.add_argument("--seconds", type=float, default=310.0)
    args = parser.parse_args()
    celery_app.conf.broker_url = "memory://"  # notices and tasks the steps send go nowhere
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        sizes = sorted(int(size) for size in args.sizes.split(","))
        print(json.dumps(measure(sizes, args.seconds), indent=2), flush=True)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
