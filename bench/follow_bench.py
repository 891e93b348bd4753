"""Following the cluster: bytes and requests per idle minute, and change-to-cache latency.

Run: `python -m bench.follow_bench [--seconds 20] [--sizes 10,1000]`. Starts kubesim in this
process, creates N labelled ResourceClaims, then, for each N, measures over the same window
what three ways of following them move (response bytes the portal's gateway reads, requests):

- poll-1s: the periodic sync as it was before the follower (one LIST of the portal's claims
  every second, which beat sends while claims are followed);
- naive-5s: a per-object poller (one GET per claim every 5 s);
- informer: claims/kube/informer.py (one LIST, then one watch with bookmarks), idle.

Then the latency from a change in kubesim (a label patched on one claim) to the informer's
cache holding it, 50 times. Prints JSON with the ratios the issue names.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import kubesim
from claims.kube.gateway import ClusterGateway
from claims.kube.informer import Informer

NAMESPACE = "follow-bench"
SELECTOR = "app.kubernetes.io/managed-by=gpu-portal"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"


class Metered:
    """Counts what a gateway reads: requests and body bytes, watches included."""

    def __init__(self, gateway: ClusterGateway) -> None:
        self.counts: Counter[str] = Counter()
        connection = gateway.connection
        perform, stream = connection._perform, connection.stream

        def metered_perform(*args: Any, **kwargs: Any) -> bytes:
            payload = perform(*args, **kwargs)
            self.counts["requests"] += 1
            self.counts["bytes"] += len(payload)
            return payload

        def metered_stream(*args: Any, **kwargs: Any) -> Iterator[bytes]:
            self.counts["requests"] += 1
            for line in stream(*args, **kwargs):
                self.counts["bytes"] += len(line) + 1
                yield line

        connection._perform = metered_perform  # type: ignore[method-assign]
        connection.stream = metered_stream  # type: ignore[method-assign]

    def reset(self) -> None:
        self.counts.clear()


def claim(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"claim-{index:05d}",
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/claim": "1"},
        },
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }


def gateway_for(handle: kubesim.Handle) -> ClusterGateway:
    return ClusterGateway(handle.kubeconfig, qps=1_000_000, burst=1_000_000)


def per_minute(counts: Counter[str], seconds: float) -> dict[str, float]:
    return {key: round(counts[key] * 60 / seconds, 1) for key in ("requests", "bytes")}


def measure(seconds: float, step: Callable[[], None], every: float) -> float:
    """Run step every `every` seconds for `seconds`; returns the time it took."""
    started = time.monotonic()
    next_at = started
    while time.monotonic() - started < seconds:
        step()
        next_at += every
        time.sleep(max(0.0, next_at - time.monotonic()))
    return time.monotonic() - started


def follow_costs(handle: kubesim.Handle, size: int, seconds: float) -> dict[str, Any]:
    names = [claim(i)["metadata"]["name"] for i in range(size)]
    results: dict[str, Any] = {}

    gateway = gateway_for(handle)
    meter = Metered(gateway)

    def list_all() -> None:
        gateway.list_claims(SELECTOR)

    took = measure(seconds, list_all, every=1.0)
    results["poll-1s"] = per_minute(meter.counts, took)

    gateway = gateway_for(handle)
    meter = Metered(gateway)

    def get_each() -> None:
        for name in names:
            gateway.read("resource.k8s.io/v1", "ResourceClaim", NAMESPACE, name)

    took = measure(seconds, get_each, every=5.0)
    results["naive-5s"] = per_minute(meter.counts, took)

    gateway = gateway_for(handle)
    meter = Metered(gateway)
    informer = Informer(gateway, "ResourceClaim", SELECTOR, lambda obj: obj, lambda: None)
    informer.start()
    while informer.current_at is None:
        time.sleep(0.05)
    results["informer-first-list"] = dict(meter.counts)
    meter.reset()
    time.sleep(seconds)  # idle: nothing changes in the cluster meanwhile
    results["informer"] = per_minute(meter.counts, seconds)
    results["informer-lists"] = informer.lists
    informer.stop()
    return results


def change_latency(handle: kubesim.Handle, samples: int) -> dict[str, float]:
    gateway, writer = gateway_for(handle), gateway_for(handle)
    seen = threading.Event()
    wanted: dict[str, str] = {}

    def on_change() -> None:
        if wanted and informer_items().get(wanted["name"]) == wanted["value"]:
            seen.set()

    informer = Informer(gateway, "ResourceClaim", SELECTOR, lambda obj: obj, on_change)

    def informer_items() -> dict[str, str]:
        items, _ = informer.snapshot()
        return {o["metadata"]["name"]: o["metadata"]["labels"].get("bench-step", "") for o in items}

    informer.start()
    while informer.current_at is None:
        time.sleep(0.05)
    delays = []
    for step in range(samples):
        seen.clear()
        wanted.update(name="claim-00000", value=str(step))
        started = time.perf_counter()
        changed = claim(0)
        changed["metadata"]["labels"]["bench-step"] = str(step)
        writer.apply(changed)
        if not seen.wait(10):
            raise RuntimeError("the informer never saw the change")
        delays.append((time.perf_counter() - started) * 1000)
    informer.stop()
    quantiles = statistics.quantiles(delays, n=20)
    return {"p50_ms": round(statistics.median(delays), 2), "p95_ms": round(quantiles[18], 2)}


def ratio(value: float, baseline: float) -> float:
    """value / baseline; two zeros are equal (1.0)."""
    if baseline == 0:
        return 1.0 if value == 0 else float("inf")
    return round(value / baseline, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sizes", default="10,1000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    handle = kubesim.start(speed=50)
    try:
        handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        report: dict[str, Any] = {"seconds": args.seconds}
        created = 0
        for size in sizes:
            for index in range(created, size):
                handle.admin(
                    "POST",
                    f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims",
                    claim(index),
                )
            created = max(created, size)
            report[f"N={size}"] = follow_costs(handle, size, args.seconds)
            report[f"N={size}"]["change_to_cache"] = change_latency(handle, 50)
        small, large = report[f"N={sizes[0]}"], report[f"N={sizes[-1]}"]
        big, bytes_of = f"N={sizes[-1]}", lambda run, way: run[way]["bytes"]
        report["ratios"] = {
            f"informer/naive-5s bytes at {big}": ratio(
                bytes_of(large, "informer"), bytes_of(large, "naive-5s")
            ),
            f"informer/poll-1s bytes at {big}": ratio(
                bytes_of(large, "informer"), bytes_of(large, "poll-1s")
            ),
            f"informer requests {big}/N={sizes[0]}": ratio(
                large["informer"]["requests"], small["informer"]["requests"]
            ),
            f"informer bytes {big}/N={sizes[0]}": ratio(
                bytes_of(large, "informer"), bytes_of(small, "informer")
            ),
        }
        print(json.dumps(report, indent=2))
    finally:
        handle.stop()


if __name__ == "__main__":
    main()
