"""kubesim benchmark: p50/p95 of get, list of 1,000 claims, create, watch delivery; GET/s.

Run: `python -m bench.kubesim_bench [--seconds 5]`. The server runs in its own process
pinned to CPU 0 (one core, as the speed goal says); this client runs on the other CPUs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import yaml

import kubesim

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"


class Connection:
    """One keep-alive HTTPS connection with the bearer token, as a client library keeps."""

    def __init__(self, url: str, ca_file: str, token: str) -> None:
        parts = urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"no host in server URL {url!r}")
        context = ssl.create_default_context(cafile=ca_file)
        self.http = http.client.HTTPSConnection(parts.hostname, parts.port, context=context)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        self.http.request(method, path, body=data, headers=self.headers)
        response = self.http.getresponse()
        return response.status, response.read()


def claim(name: str) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": {"bench": "yes"}},
        "spec": {"devices": {"requests": [request]}},
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": round(pick(0.50) * 1000, 2), "p95_ms": round(pick(0.95) * 1000, 2)}


def timed(action: Callable[[], object], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def start_server(workdir: str) -> tuple[subprocess.Popen, dict]:
    kubeconfig = Path(workdir) / "kubeconfig"
    process = kubesim.spawn(
        kubeconfig,
        "--speed",
        "50",
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {0}),
    )
    return process, yaml.safe_load(kubeconfig.read_text())


def connection_factory(config: dict, workdir: str) -> Callable[[], Connection]:
    import base64

    cluster = config["clusters"][0]["cluster"]
    ca_file = Path(workdir) / "ca.pem"
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    token = config["users"][0]["user"]["token"]
    return lambda: Connection(cluster["server"], str(ca_file), token)


def gets_per_second(connect: Callable[[], Connection], seconds: float, threads: int) -> float:
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def hammer(index: int) -> None:
        connection = connect()
        while time.monotonic() < stop:
            status, _ = connection.call("GET", f"/api/v1/namespaces/{NAMESPACE}")
            assert status == 200
            counts[index] += 1

    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return round(sum(counts) / seconds, 1)


def watch_delivery(connect: Callable[[], Connection], events: int) -> dict[str, float]:
    watcher, creator = connect(), connect()
    _, body = watcher.call("GET", CLAIMS + "?limit=1")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    watcher.http.request("GET", f"{CLAIMS}?watch=1&resourceVersion={rv}", headers=watcher.headers)
    stream = watcher.http.getresponse()
    arrivals: queue.Queue[float] = queue.Queue()

    def read() -> None:
        for _ in range(events):
            stream.readline()
            arrivals.put(time.perf_counter())

    threading.Thread(target=read, daemon=True).start()
    samples = []
    for index in range(events):
        started = time.perf_counter()
        creator.call("POST", CLAIMS, claim(f"watched-{index}"))
        samples.append(arrivals.get(timeout=10) - started)
    return percentiles(samples)


def run(seconds: float, threads: int) -> dict[str, object]:
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)) or {0})
    with tempfile.TemporaryDirectory() as workdir:
        process, config = start_server(workdir)
        try:
            connect = connection_factory(config, workdir)
            return measure(connect, seconds, threads)
        finally:
            process.terminate()
            process.wait(timeout=10)


def measure(connect: Callable[[], Connection], seconds: float, threads: int) -> dict[str, object]:
    one = connect()
    one.call("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    counter = iter(range(10**6))
    results: dict[str, object] = {
        "create claim": timed(lambda: one.call("POST", CLAIMS, claim(f"c-{next(counter)}")), 1000),
    }
    results["get claim"] = timed(lambda: one.call("GET", f"{CLAIMS}/c-1"), 1000)
    results["list 1,000 claims"] = timed(
        lambda: one.call("GET", CLAIMS + "?labelSelector=bench"), 20
    )
    results["watch event delivery"] = watch_delivery(connect, 200)
    results["GET/s (server on one core)"] = gets_per_second(connect, seconds, threads)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    results = run(args.seconds, args.threads)
    print(
        json.dumps({"cpus": os.cpu_count(), "python": sys.version.split()[0], **results}, indent=2)
    )


if __name__ == "__main__":
    main()
