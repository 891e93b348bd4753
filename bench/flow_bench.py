"""The whole product against the seed's kubectl loop: 20 flows, freshness, writes.

Run: `python -m bench.flow_bench [--flows 20] [--freshness 50]`. Starts, on loopback only:
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
import base64
import json
import os
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import requests
import yaml

import kubesim

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
DATABASE = "portal_bench"
POSTGRES = "postgres://postgres@127.0.0.1:5432"
REDIS_URL = "redis://127.0.0.1:6379/13"
TOPOLOGY = {
    "nodes": [
        {"name": f"gpu-node-{n}", "gpus": [{"model": "H100-80GB-HBM3", "count": 8}]}
        for n in (1, 2, 3)
    ]
}
CLAIM_USABLE = ("waiting", "in_use")
# Seconds each step of each flow took, by "phase: step" (appended to from the flows' threads).
STEPS: defaultdict[str, list[float]] = defaultdict(list)
FINAL = ("succeeded", "failed")
SETUP_USERS = """
import json
from django.contrib.auth.models import User
from knox.models import AuthToken
from claims.models import Cluster, Team
team = Team.objects.create(name="bench", auto_approve=True)
tokens = []
for index in range({users}):
    user = User.objects.create_user(f"bench{{index:02d}}", f"bench{{index:02d}}@example.org")
    team.members.add(user)
    tokens.append(AuthToken.objects.create(user=user, expiry=None, prefix="gpup_")[1])
print(json.dumps({{"cluster": Cluster.objects.get().id, "tokens": tokens}}))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Product:
    """kubesim, the database, web, worker, beat and follower, each in its own process."""

    def __init__(self, workdir: Path, users: int, speed: int = 50) -> None:
        self.workdir = workdir
        self.users = users
        self.speed = speed  # kubesim's: at 50 a run's Pod lasts well under a second
        self.processes: list[subprocess.Popen] = []
        self.names: dict[int, str] = {}  # pid -> service, for the CPU accounting
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.kubeconfig = str(workdir / "kubeconfig")
        self.env = {
            **os.environ,
            "DEBUG": "False",
            "SECRET_KEY": "flow-bench-" + "x" * 50,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": f"{POSTGRES}/{DATABASE}",
            "REDIS_URL": REDIS_URL,
            "CELERY_QUEUE": f"flow-bench-{os.getpid()}",
            "KUBECONFIG": self.kubeconfig,
            "CLUSTER_NAME": "kubesim",
            "SIMULATED_CLUSTER": "True",
            "KUBE_CLIENT_QPS": "1000",
            "KUBE_CLIENT_BURST": "2000",
            "PORTAL_VAR_DIR": str(workdir),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
            # The notices (approved, allocated) are sent, to memory: a local relay's part, not
            # the portal's, and no SMTP server listens here.
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        }

    def start(self) -> KubesimAdmin:
        topology = self.workdir / "topology.yaml"
        topology.write_text(yaml.safe_dump(TOPOLOGY))
        self.add(
            "kubesim",
            kubesim.spawn(
                self.kubeconfig,
                "--speed",
                str(self.speed),
                "--topology",
                str(topology),
                stdout=self.log("kubesim"),
                stderr=subprocess.STDOUT,
            ),
        )
        self.fresh_database()
        self.manage("migrate", "--verbosity", "0")
        # DEBUG is off: whitenoise serves the collected files (the pages' live.js, htmx).
        self.manage("collectstatic", "--noinput", "--verbosity", "0")
        self.manage("ensure_cluster")
        setup = self.manage("shell", "-c", SETUP_USERS.format(users=self.users))
        self.cluster, self.tokens = setup["cluster"], setup["tokens"]
        self.start_services()
        return KubesimAdmin(self.kubeconfig)

    def log(self, name: str) -> Any:
        return (self.workdir / f"{name}.log").open("w")

    def fresh_database(self) -> None:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            connection.execute(f"CREATE DATABASE {DATABASE}")
        subprocess.run(["redis-cli", "-u", REDIS_URL, "flushdb"], check=True, capture_output=True)

    def manage(self, *args: str) -> Any:
        result = subprocess.run(
            [PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        if result.returncode:
            raise RuntimeError(f"manage.py {args[0]} failed: {result.stderr}")
        last = (result.stdout.strip().splitlines() or [""])[-1]
        return json.loads(last) if last.startswith("{") else None

    def start_services(self) -> None:
        celery = [PYTHON, "-m", "celery", "-A", "portal"]
        pool = ["-P", "threads", "-c", "8", "-Q", self.env["CELERY_QUEUE"]]
        self.spawn("worker", [*celery, "worker", "-l", "warning", *pool])
        self.spawn("beat", [*celery, "beat", "-l", "warning", "-s", str(self.workdir / "beat")])
        self.spawn("follower", [PYTHON, "manage.py", "follow_clusters"])
        gunicorn = [PYTHON, "-m", "gunicorn", "portal.wsgi", "-b", f"127.0.0.1:{self.port}"]
        self.spawn("web", [*gunicorn, "-w", "2", "--threads", "16", "--no-control-socket"])
        wait_until(self.answers, "the web server", 60)

    def spawn(self, name: str, args: list[str]) -> None:
        self.add(
            name,
            subprocess.Popen(
                args, cwd=ROOT, env=self.env, stdout=self.log(name), stderr=subprocess.STDOUT
            ),
        )

    def add(self, name: str, process: subprocess.Popen) -> None:
        self.processes.append(process)
        self.names[process.pid] = name

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each service has used so far, its child processes
        (gunicorn's workers, PostgreSQL's backends) included. PostgreSQL and Redis are the
        machine's: what else uses them in the meantime is counted too."""
        pids = {**self.names, **machine_services()}
        return {name: tree_cpu_seconds(pid) for pid, name in pids.items()}

    def answers(self) -> bool:
        try:
            return requests.get(self.url + "/accounts/login/", timeout=10).ok
        except requests.RequestException:
            return False

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


class KubesimAdmin:
    """The kubesim API with the admin token of its kubeconfig: counters and a Pod watch."""

    def __init__(self, kubeconfig: str) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        self.url = config["clusters"][0]["cluster"]["server"]
        self.token = config["users"][0]["user"]["token"]
        ca_path = Path(kubeconfig).with_suffix(".ca")
        ca_path.write_bytes(
            base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        )
        self.context = ssl.create_default_context(cafile=str(ca_path))

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            return dict(json.loads(response.read() or b"{}"))

    def watch_pods(self, namespace: str, seen: dict[tuple[str, str], float]) -> threading.Thread:
        """Record when each Pod of the namespace is first seen in each phase."""
        path = f"/api/v1/namespaces/{namespace}/pods?watch=1&timeoutSeconds=600"
        request = urllib.request.Request(self.url + path)
        request.add_header("Authorization", f"Bearer {self.token}")
        response = urllib.request.urlopen(request, context=self.context, timeout=600)

        def read() -> None:
            with response:
                for line in response:
                    at = time.perf_counter()
                    pod = json.loads(line)["object"]
                    key = (pod["metadata"]["name"], pod.get("status", {}).get("phase", ""))
                    seen.setdefault(key, at)

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread


def machine_services() -> dict[int, str]:
    """The pids of this machine's PostgreSQL server (its postmaster) and Redis server."""
    found = {}
    for name, pattern in (("postgresql", "postgres -D"), ("redis", "redis-server")):
        result = subprocess.run(["pgrep", "-o", "-f", pattern], capture_output=True, text=True)
        if result.stdout.strip():
            found[int(result.stdout.split()[0])] = name
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants, from /proc; for the
    process itself, that of its children that have ended too (a closed PostgreSQL backend)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: defaultdict[int, list[int]] = defaultdict(list)
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(entry.name))
        ended = int(fields[13]) + int(fields[14]) if int(entry.name) == pid else 0
        times[int(entry.name)] = (int(fields[11]) + int(fields[12]) + ended) / tick
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo.extend(children.get(current, []))
    return total


def client_cpu_seconds() -> float:
    """This script's CPU (the API clients) plus that of the kubectl processes it waited for."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr}")
    return result.stdout


def seed_manifests(namespace: str) -> tuple[str, str]:
    """The seed's ResourceClaim (in resource.k8s.io/v1) and pod1, in the given namespace."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": "gpu-claim"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    images = {
        "ctr0": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "ctr1": "nvcr.io/nvidia/k8s/cuda-sample:devicequery",
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": namespace},
        "spec": {
            "restartPolicy": "OnFailure",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [
                {"name": name, "image": image, "resources": {"claims": [{"name": "gpu"}]}}
                for name, image in images.items()
            ],
        },
    }
    return yaml.safe_dump(claim), yaml.safe_dump(pod)


@contextmanager
def step(namespace: str, name: str) -> Iterator[None]:
    """Time one step of a flow, under its phase (the namespace without its number)."""
    started = time.perf_counter()
    yield
    STEPS[f"{namespace.rsplit('-', 1)[0]}: {name}"].append(time.perf_counter() - started)


def kubectl_flow(kubeconfig: str, namespace: str) -> None:
    claim, pod = seed_manifests(namespace)
    with step(namespace, "create namespace"):
        kubectl(kubeconfig, "create", "namespace", namespace)
    with step(namespace, "apply claim, apply pod"):
        kubectl(kubeconfig, "apply", "-f", "-", stdin=claim)
        kubectl(kubeconfig, "apply", "-f", "-", stdin=pod)
    jsonpath = "--for=jsonpath={.status.phase}=Succeeded"
    with step(namespace, "wait Succeeded"):
        kubectl(kubeconfig, "-n", namespace, "wait", jsonpath, "pod/pod1", "--timeout=120s")
    with step(namespace, "logs"):
        for container in ("ctr0", "ctr1"):
            log = kubectl(kubeconfig, "-n", namespace, "logs", "pod1", "-c", container)
            check_log(container, log)


def has_ending(container: str, text: str) -> bool:
    return ("Test PASSED" if container == "ctr0" else "Result = PASS") in text


def check_log(container: str, text: str) -> None:
    if not has_ending(container, text):
        raise RuntimeError(f"{container} log does not end as the CUDA sample does: {text[-200:]!r}")


class PortalClient:
    """One data scientist's script through the REST API, on a keep-alive session."""

    def __init__(self, url: str, token: str, cluster: int) -> None:
        self.url, self.cluster = url + "/api/v1", cluster
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        # Reads of an ended run's log that came back without the sample's last line.
        self.short_log_reads = 0
        # Requests sent, and long-polls answered within a second with the state already known
        # (the server's bound on waiting requests answers at once; the client asks again).
        self.requests = 0
        self.quick_unchanged = 0
        self.connection_resets = 0  # requests sent again on a new connection

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        # As a careful script: a POST carries an Idempotency-Key, so that it can be sent again
        # when a kept-alive connection the server had just closed is reset under it.
        headers = {"Idempotency-Key": uuid.uuid4().hex} if method == "POST" else {}
        resets = 0
        while True:
            self.requests += 1
            try:
                response = self.session.request(
                    method, self.url + path, timeout=90, headers=headers, **kwargs
                )
            except requests.ConnectionError:
                resets += 1
                self.connection_resets += 1
                if resets > 2:
                    raise
                continue
            if response.status_code != 429:
                response.raise_for_status()
                return response
            time.sleep(float(response.headers.get("Retry-After", "1")))

    def wait_for(
        self,
        path: str,
        state: str,
        until: tuple[str, ...],
        seen: list[tuple[str, float]],
        every_change: bool = False,
    ) -> dict[str, Any]:
        """Long-poll the object until its state is one of `until` (the server answers then;
        with every_change, at each change); each answer into `seen`."""
        wanted = f"state={state}" if every_change else f"until={','.join(until)}"
        while True:
            asked = time.perf_counter()
            response = self.call("GET", f"{path}?wait=30&{wanted}")
            body = response.json()
            if body["state"] == state and time.perf_counter() - asked < 1:
                self.quick_unchanged += 1
            if "Retry-After" in response.headers:  # its wait was refused: as docs/api.md says
                time.sleep(float(response.headers["Retry-After"]))
            if body["state"] != state:
                seen.append((body["state"], time.perf_counter()))
            state = body["state"]
            if state in until or state == "failed":
                return dict(body)
            wanted = f"state={state}" if every_change else wanted

    def claim(self, namespace: str, wait: bool = True) -> int:
        """Ask for the namespace and the claim; with wait, until the claim is usable."""
        ns = self.call(
            "POST",
            "/namespace-requests/",
            json={"cluster": self.cluster, "name": namespace, "purpose": "flow bench"},
        ).json()
        claim = self.call(
            "POST",
            "/claims/",
            json={
                "namespace_request": ns["id"],
                "name": "gpu-claim",
                "device_class": "gpu.nvidia.com",
                "count": 1,
            },
        ).json()
        if not wait:
            return int(claim["id"])
        usable = self.wait_for(f"/claims/{claim['id']}/", claim["state"], CLAIM_USABLE, [])
        if usable["state"] not in CLAIM_USABLE:
            raise RuntimeError(f"claim {namespace}: {usable['state']} {usable['state_message']}")
        return int(claim["id"])

    def run(
        self, claim: int, seen: list[tuple[str, float]], every_change: bool = False
    ) -> dict[str, Any]:
        run = self.call("POST", "/runs/", json={"claim": claim}).json()
        ended = self.wait_for(f"/runs/{run['id']}/", run["state"], FINAL, seen, every_change)
        if ended["state"] != "succeeded":
            raise RuntimeError(f"run {run['id']}: {ended['state']} {ended['state_message']}")
        return ended

    def read_log(self, run: int, container: str) -> None:
        """The run has ended (X-Log-Complete: true), so its log should be whole; when it is
        not, count it and read again, so the flow finishes and the report says how often."""
        deadline = time.monotonic() + 10
        while True:
            text = self.call("GET", f"/runs/{run}/logs/{container}/").text
            if has_ending(container, text) or time.monotonic() > deadline:
                check_log(container, text)
                return
            self.short_log_reads += 1
            time.sleep(0.05)

    def flow(self, namespace: str) -> None:
        """As the seed's loop: namespace, claim and the run's Pod asked for one after the
        other (the run is queued until the claim is applied), then wait for the end."""
        with step(namespace, "namespace, claim"):
            claim = self.claim(namespace, wait=False)
        with step(namespace, "run until final"):
            run = self.run(claim, [])
        with step(namespace, "logs"):
            for container in ("ctr0", "ctr1"):
                self.read_log(run["id"], container)


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


@contextmanager
def running_product(
    flows: int, keep: bool, speed: int = 50
) -> Iterator[tuple[Product, KubesimAdmin]]:
    workdir = Path(tempfile.mkdtemp(prefix="flow-bench-"))
    product = Product(workdir, users=flows, speed=speed)
    try:
        yield product, product.start()
    finally:
        product.stop()
        if keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flows", type=int, default=20)
    parser.add_argument("--freshness", type=int, default=50, help="runs timed for freshness")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs")
    args = parser.parse_args()
    with running_product(args.flows, args.keep) as (product, admin):
        started = time.perf_counter()
        report: dict[str, Any] = {"flows": args.flows}
        report.update(loops(product, admin, args.flows))
        report["freshness_ms"] = freshness(product, admin, args.freshness)
        report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
