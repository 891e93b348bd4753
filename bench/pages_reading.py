"""The pages bench's readers over HTTP: the portal on a threaded WSGI server on loopback,
requests per second from a few client threads, and every claim read through the API against
`kubectl get resourceclaims -A -o json` over kubesim (bench/pages_bench.py)."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import connections

import kubesim
from bench.kubesim_bench import claim

ROOT = Path(__file__).resolve().parents[1]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class ThreadedWSGIServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        threading.Thread(target=self._serve, args=(request, client_address), daemon=True).start()

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)
            # A finished thread gives its connections back (to the pool, or closes them).
            connections.close_all()


@contextmanager
def serving() -> Iterator[str]:
    """The portal on a threaded WSGI server on loopback; its base URL."""
    from portal.wsgi import application

    server = make_server(
        "127.0.0.1", 0, application, server_class=ThreadedWSGIServer, handler_class=QuietHandler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def read_through_api(token: str, expected: int) -> float:
    """Seconds to read every claim: cursor pages of 1,000 over HTTP, as a client would."""
    with serving() as base:
        return _median_of(3, lambda: _read_all(base, token, expected))


def requests_per_second(
    base: str, path: str, headers: dict[str, str], status: int, seconds: float = 3, clients: int = 4
) -> float:
    """Answers per second to `clients` threads asking for path one after another."""
    stop = time.monotonic() + seconds
    answered = [0] * clients

    def ask(index: int) -> None:
        while time.monotonic() < stop:
            request = urllib.request.Request(base + path, headers=headers)
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                assert response.status == status, (path, response.status)
            answered[index] += 1

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(ask, range(clients)))
    return round(sum(answered) / seconds, 1)


def _read_all(base: str, token: str, expected: int) -> None:
    url: str | None = f"{base}/api/v1/claims/?cursor=&page_size=1000"
    seen = 0
    while url:
        request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            page = json.loads(response.read())
        seen += len(page["results"])
        url = page["next"]
    assert seen == expected, (seen, expected)


def _median_of(runs: int, action: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def read_through_kubectl(count: int, namespaces: int) -> float:
    """Seconds `kubectl get resourceclaims -A -o json` takes for `count` claims in kubesim."""
    with tempfile.TemporaryDirectory() as workdir:
        kubeconfig = Path(workdir) / "kubeconfig"
        process = kubesim.spawn(
            kubeconfig, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _create_in_kubesim(kubeconfig, workdir, count, namespaces)
            command = ["kubectl", "--kubeconfig", str(kubeconfig)]
            command += ["get", "resourceclaims", "-A", "-o", "json"]

            def run() -> None:
                listed = subprocess.run(command, capture_output=True, check=True)
                items = json.loads(listed.stdout)["items"]
                # The default cluster also holds another team's claims, made by its workloads.
                ours = [item for item in items if item["metadata"]["name"].startswith("claim-")]
                assert len(ours) == count, (len(ours), count)

            return _median_of(3, run)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _create_in_kubesim(kubeconfig: Path, workdir: str, count: int, namespaces: int) -> None:
    import yaml

    from bench.kubesim_bench import connection_factory

    connect = connection_factory(yaml.safe_load(kubeconfig.read_text()), workdir)
    setup = connect()
    for n in range(namespaces):
        setup.call("POST", "/api/v1/namespaces", {"metadata": {"name": f"team-{n}"}})

    def create(part: int) -> None:
        client = connect()
        for index in range(part, count, 8):
            path = f"/apis/resource.k8s.io/v1/namespaces/team-{index % namespaces}/resourceclaims"
            status, body = client.call("POST", path, claim(f"claim-{index:05d}"))
            assert status == 201, (status, body[:200])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(8)))
