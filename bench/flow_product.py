"""The product a flow benchmark runs against, kubesim's admin API, and CPU accounting.

Each service in its own process: kubesim, the database, web, worker, beat and follower.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

    def __init__(
        self,
        workdir: Path,
        users: int,
        speed: float = 50,
        lifted: bool = False,
        database: str = DATABASE,
        redis_url: str = REDIS_URL,
    ) -> None:
        """lifted: the client's rate limit lifted (1,000 a second), to compare with the
        shipped one; by default the product runs as shipped. database and redis_url: a bench
        that may run beside another (flow_bench) takes a database and Redis DB of its own."""
        self.workdir = workdir
        self.database, self.redis_url = database, redis_url
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
            "DATABASE_URL": f"{POSTGRES}/{database}",
            "REDIS_URL": redis_url,
            "CELERY_QUEUE": f"flow-bench-{os.getpid()}",
            "KUBECONFIG": self.kubeconfig,
            "CLUSTER_NAME": "kubesim",
            "SIMULATED_CLUSTER": "True",
            "PORTAL_VAR_DIR": str(workdir),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
            # The notices (approved, allocated) are sent, to memory: a local relay's part, not
            # the portal's, and no SMTP server listens here.
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        }
        if lifted:
            self.env |= {"KUBE_CLIENT_QPS": "1000", "KUBE_CLIENT_BURST": "2000"}

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
            connection.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")
            connection.execute(f"CREATE DATABASE {self.database}")
        flush = ["redis-cli", "-u", self.redis_url, "flushdb"]
        subprocess.run(flush, check=True, capture_output=True)

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
        self.spawn("web", [*gunicorn, "-w", "2", "--threads", "128", "--no-control-socket"])
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

    def rate_limit(self) -> str:
        """The client's rate limit per cluster the product runs with."""
        qps, burst = self.env.get("KUBE_CLIENT_QPS"), self.env.get("KUBE_CLIENT_BURST")
        return f"{qps} / {burst} (lifted)" if qps else "as shipped (KUBE_CLIENT_QPS defaults)"

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


@contextmanager
def running_product(
    flows: int,
    keep: bool,
    speed: float = 50,
    lifted: bool = False,
    database: str = DATABASE,
    redis_url: str = REDIS_URL,
) -> Iterator[tuple[Product, KubesimAdmin]]:
    workdir = Path(tempfile.mkdtemp(prefix="flow-bench-"))
    product = Product(
        workdir, users=flows, speed=speed, lifted=lifted, database=database, redis_url=redis_url
    )
    try:
        yield product, product.start()
    finally:
        product.stop()
        if keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
