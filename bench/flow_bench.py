"""The whole product against the seed's kubectl loop: 20 flows, freshness, writes.

Run: `python -m bench.flow_bench [--flows 20] [--freshness 50] [--lifted]`. The product runs
as shipped (the client's rate limit per cluster, the cluster loop, beat's reconciler); with
--lifted, with the rate limit lifted to compare. Starts, on loopback only:
kubesim in its own process (speed 50, three nodes of 8 GPUs so 20 Pods fit at once), a
PostgreSQL database of its own (`portal_bench`, dropped and migrated), gunicorn, a Celery
worker and beat on a Redis database and queue of their own, and `manage.py follow_clusters`.
One team with auto-approval and no quota; one data scientist with an API token per flow (the
API bounds long-polls per user, so one script user would measure that bound, not the flow).

Measures, in one run, printing JSON:
- kubectl: per flow, the seed's loop (`kubectl create namespace`, `kubectl apply` of the v1
  ResourceClaim, then of pod1, `kubectl wait` for Succeeded, `kubectl logs` of ctr0 and ctr1),
  20 one after another, then 20 in threads;
- portal: the same through the REST API (namespace request, claim, run — queued until the
  claim is applied, as kubectl applies the Pod right after the claim — then one long-poll
  `?until=succeeded,failed`, both logs), sequential, parallel, and the parallel burst once
  more (as a portal up for a while meets it), with the ratios, and the least time the
  parallel burst could take on this machine's cores given the CPU it used (its "floor");
- freshness: a Pod phase change in kubesim (seen on a watch of our own) to the run's
  long-poll answering with it, p50/p95;
- writes: kubesim's POST/PATCH/PUT counters over the portal's flows, per flow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from bench.flow_kubectl import kubectl_flow
from bench.flow_portal import PortalClient
from bench.flow_product import KubesimAdmin, Product, client_cpu_seconds, running_product
from bench.flow_steps import STEPS


def timed(
    flows: list[Callable[[], None]], parallel: bool, product: Product, cpu: dict[str, Any], key: str
) -> float:
    """Seconds the flows took; the CPU seconds each process spent on them into cpu[key]."""
    before = {**product.cpu_seconds(), "client": client_cpu_seconds()}
    started = time.perf_counter()
    if parallel:
        with ThreadPoolExecutor(max_workers=len(flows)) as pool:
            for future in [pool.submit(flow) for flow in flows]:
                future.result()
    else:
        for flow in flows:
            flow()
    elapsed = round(time.perf_counter() - started, 3)
    after = {**product.cpu_seconds(), "client": client_cpu_seconds()}
    cpu[key] = {name: round(after[name] - before[name], 2) for name in before}
    return elapsed


def loops(product: Product, admin: KubesimAdmin, flows: int) -> dict[str, Any]:
    def kubectl_flows(prefix: str) -> list[Callable[[], None]]:
        config = product.kubeconfig
        return [partial(kubectl_flow, config, f"{prefix}-{i:02d}") for i in range(flows)]

    clients = [PortalClient(product.url, token, product.cluster) for token in product.tokens]

    def portal_flows(prefix: str) -> list[Callable[[], None]]:
        return [partial(clients[i].flow, f"{prefix}-{i:02d}") for i in range(flows)]

    cpu: dict[str, Any] = {}
    report: dict[str, Any] = {
        "kubectl_sequential_s": timed(kubectl_flows("kc-seq"), False, product, cpu, "kubectl seq"),
        "kubectl_parallel_s": timed(kubectl_flows("kc-par"), True, product, cpu, "kubectl par"),
    }
    admin.call("POST", "/_kubesim/counters/reset")
    for way in ("sequential", "parallel"):
        report[f"portal_{way}_s"] = timed(
            portal_flows(f"api-{way[:3]}"), way == "parallel", product, cpu, f"portal {way[:3]}"
        )
        for counted in ("short_log_reads", "requests", "quick_unchanged", "connection_resets"):
            total = sum(getattr(client, counted) for client in clients)
            report[f"portal_{way}_{counted}"] = total - report.get(f"portal_{counted}", 0)
            report[f"portal_{counted}"] = total
    report["portal_writes"] = writes(admin.call("GET", "/_kubesim/counters")["requests"], flows * 2)
    # The same burst again: the first met web and worker threads that had not served yet (a
    # database connection, a cluster connection each to open); a portal that has been up
    # for a while meets a burst as this one does. Reported beside the first, not instead.
    # New sessions (portal_flows reads `clients`): the old ones idled past gunicorn's keep-alive.
    clients = [PortalClient(product.url, token, product.cluster) for token in product.tokens]
    report["portal_parallel_again_s"] = timed(
        portal_flows("api-pa2"), True, product, cpu, "portal par again"
    )
    report["step_median_s"] = {
        name: round(statistics.median(times), 3) for name, times in sorted(STEPS.items())
    }
    report["cpu_seconds"] = cpu
    # The baseline is the seed's loop as the seed runs it: one flow after another.
    loop = report["kubectl_sequential_s"]
    report["ratio_sequential"] = round(report["portal_sequential_s"] / loop, 3)
    report["ratio_parallel"] = round(report["portal_parallel_s"] / loop, 3)
    report["ratio_parallel_again"] = round(report["portal_parallel_again_s"] / loop, 3)
    report["ratio_parallel_to_kubectl_parallel"] = round(
        report["portal_parallel_s"] / report["kubectl_parallel_s"], 3
    )
    # The least time the parallel burst could take with every core busy all along: its CPU
    # seconds (every process measured, PostgreSQL and Redis included) over the cores.
    cores = os.cpu_count() or 1
    floor = sum(cpu["portal par"].values()) / cores
    report["portal_parallel_cpu_floor_s"] = round(floor, 3)
    report["ratio_parallel_cpu_floor"] = round(floor / loop, 3)
    return report


def writes(counters: dict[str, int], flows: int) -> dict[str, Any]:
    """kubesim's write requests by verb and resource, in all and per flow."""
    written = {
        key: count
        for key, count in sorted(counters.items())
        if key.split(" ")[0] in ("create", "patch", "update", "delete", "deletecollection")
    }
    dry_runs = {key: count for key, count in sorted(counters.items()) if key.startswith("dry-run ")}
    per_flow = {k: round(v / flows, 2) for k, v in written.items()}
    return {
        "total": written,
        "per_flow": per_flow,
        "dry_runs_per_flow": {k: round(v / flows, 2) for k, v in dry_runs.items()},
    }


def freshness(product: Product, admin: KubesimAdmin, samples: int) -> dict[str, Any]:
    """Runs one after another on one claim; Pod phase in kubesim -> long-poll answer."""
    client = PortalClient(product.url, product.tokens[0], product.cluster)
    namespace = "fresh-00"
    claim = client.claim(namespace)
    phases: dict[tuple[str, str], float] = {}
    admin.watch_pods(namespace, phases)
    delays: dict[str, list[float]] = {"running": [], "succeeded": []}
    for _ in range(samples):
        seen: list[tuple[str, float]] = []
        ended = client.run(claim, seen, every_change=True)
        for state, at in seen:
            changed_at = phases.get((ended["pod_name"], state.capitalize()))
            if state in delays and changed_at is not None:
                delays[state].append((at - changed_at) * 1000)
    return {state: quantiles(values) for state, values in delays.items()}


def quantiles(values: list[float]) -> dict[str, Any]:
    if len(values) < 2:
        return {"samples": len(values)}
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return {
        "samples": len(values),
        "p50_ms": round(statistics.median(values), 1),
        "p95_ms": round(cuts[18], 1),
        "max_ms": round(max(values), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flows", type=int, default=20)
    parser.add_argument("--freshness", type=int, default=50, help="runs timed for freshness")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs")
    parser.add_argument(
        "--lifted", action="store_true", help="lift the client's rate limit (not as shipped)"
    )
    args = parser.parse_args()
    with running_product(args.flows, args.keep, lifted=args.lifted) as (product, admin):
        started = time.perf_counter()
        report: dict[str, Any] = {"flows": args.flows, "rate_limit": product.rate_limit()}
        report.update(loops(product, admin, args.flows))
        report["freshness_ms"] = freshness(product, admin, args.freshness)
        report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
