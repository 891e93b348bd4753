"""kubesim: a small Kubernetes API server simulating a cluster with DRA GPUs.

`kubesim.start(...)` runs one in this process and returns a `Handle`; `python -m kubesim
serve` runs one from the command line (docs/kubesim.md).
"""

from __future__ import annotations

import base64
import json as jsonlib
import logging
import os
import secrets
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesim.apiserver.dcgm_exporter import DcgmExporters
from kubesim.apiserver.faults import Faults, parse_fault
from kubesim.apiserver.routes import Api
from kubesim.apiserver.server import ApiServer, serve_in_thread
from kubesim.auth.authentication import Authenticator, read_token_file
from kubesim.auth.bootstrap_policy import Aggregator, seed_policy
from kubesim.base import certs
from kubesim.cluster import workloads
from kubesim.cluster.topology import Topology, seed
from kubesim.cluster.topology import load as load_topology
from kubesim.controllers.device_taint_eviction import DeviceTaintEviction
from kubesim.controllers.garbage import GarbageCollector
from kubesim.controllers.jobs import JobController
from kubesim.controllers.namespaces import NamespaceFinalizer
from kubesim.controllers.node_lifecycle import NodeLifecycle
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.serviceaccounts import ServiceAccountsController
from kubesim.controllers.ttl_after_finished import TTLAfterFinished
from kubesim.kubelet.kubelet import Kubelet
from kubesim.registry.kinds.configmaps import RootCAPublisher
from kubesim.registry.ownership import record_write
from kubesim.registry.quota import QuotaController
from kubesim.registry.store import Store

__all__ = ["Handle", "spawn", "start"]
log = logging.getLogger("kubesim")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class Handle:
    url: str
    kubeconfig: str
    token: str
    ca_pem: bytes
    api: Api
    _server: ApiServer
    _stoppables: list[Any] = field(default_factory=list)
    _temporary_kubeconfig: bool = False
    _stopped: bool = False
    dcgm: DcgmExporters | None = None  # every GPU node's dcgm-exporter (plain HTTP)

    @property
    def dcgm_exporter_urls(self) -> dict[str, str]:
        """Node name -> the URL its dcgm-exporter's /metrics answers on."""
        return self.dcgm.node_urls() if self.dcgm else {}

    def admin(self, method: str, path: str, json: Any = None) -> dict[str, Any]:
        """Call the admin API (/_kubesim/...), or any API path, with the token; an error
        status raises urllib's HTTPError (tests rely on it)."""
        data = jsonlib.dumps(json).encode() if json is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method.upper())
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return jsonlib.loads(response.read() or b"{}")

    @property
    def store(self) -> Store:
        return self.api.store

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.api.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        for component in reversed(self._stoppables):
            component.stop()
        self.api.store.close()
        if self._temporary_kubeconfig and os.path.exists(self.kubeconfig):
            os.unlink(self.kubeconfig)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bootstrap(
    store: Store, kinds: dict, cluster: Topology, k8s_version: str, served: tuple[str, ...]
) -> None:
    namespaces = kinds[("", "namespaces")]
    for name in DEFAULT_NAMESPACES:
        if not store.exists(namespaces, None, name):
            obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            namespaces.apply_defaults(obj)
            record_write(namespaces, None, obj, "kube-apiserver")  # its system namespaces
            store.create(namespaces, obj)
    if not store.has_objects("", "nodes"):  # a --state file brings its own
        seed(store, cluster, k8s_version=k8s_version, served_versions=served)
    seed_policy(store, kinds)


def writes_allocation_timestamp(k8s_version: str) -> bool:
    """Kubernetes 1.34 added status.allocation.allocationTimestamp to the API, but its
    scheduler writes it only with alpha feature gates (DRADeviceBindingConditions), which a
    default 1.34 cluster does not turn on: a real v1.34.9 allocation has none (recording
    01-seed-claim-versions). kubesim plays default clusters, so never."""
    del k8s_version
    return False


def _controllers(
    store: Store, cluster: Topology, speed: float, k8s_version: str, kubelet: bool, faults: Faults
) -> tuple[Scheduler, Kubelet | None]:
    """The scheduler, and the kubelet of every node unless `kubelet` is False (then Pods are
    scheduled but never start, as on the recordings' control plane without kubelets)."""
    timestamp = writes_allocation_timestamp(k8s_version)
    scheduler = Scheduler(store, cluster, allocation_timestamp=timestamp).start()
    return scheduler, Kubelet(store, cluster, speed, faults).start() if kubelet else None


class _StateSaver:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubesim-state", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.store.save()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def kubeconfig_text(url: str, ca_pem: bytes, token: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubesim",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": "kubesim", "user": {"token": token}}],
        "contexts": [
            {
                "name": "kubesim",
                "context": {"cluster": "kubesim", "user": "kubesim", "namespace": "default"},
            }
        ],
        "current-context": "kubesim",
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: str, text: str) -> None:
    """Write atomically, so a reader never sees half a kubeconfig."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kubeconfig-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _add_initial_faults(
    faults: Faults, latency_ms: float, error_rate: float, error_codes: tuple[int, ...]
) -> None:
    """The start-up faults, added to the one Faults every part holds (the kubelet too)."""
    if latency_ms or error_rate:
        spec = {
            "path": r"^/api",
            "latency_ms": latency_ms,
            "error_rate": error_rate,
            "error_codes": list(error_codes),
        }
        faults.add(parse_fault(spec))


def _url(server: ApiServer, api: Api) -> str:
    bound_host, bound_port = server.server_address[:2]
    host = bound_host.decode() if isinstance(bound_host, bytes) else str(bound_host)
    # Listening on every interface: clients on this machine still reach it on loopback.
    reachable = "127.0.0.1" if host == "0.0.0.0" else host
    api.server_address = f"{reachable}:{bound_port}"
    return f"https://{reachable}:{bound_port}"


def _temporary_path() -> str:
    fd, path = tempfile.mkstemp(prefix="kubesim-", suffix=".kubeconfig")
    os.close(fd)
    return path


def start(
    host: str = "127.0.0.1",
    port: int = 0,
    kubeconfig: str | None = None,
    topology: str | None = None,
    speed: float = 1.0,
    served_versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1"),
    k8s_version: str = "1.34.1",
    state: str | None = None,
    token: str | None = None,
    latency_ms: float = 0,
    error_rate: float = 0.0,
    error_codes: tuple[int, ...] = (500,),
    token_auth_file: str | None = None,
    kubelet: bool = True,
    anonymous_auth: bool = True,
    dcgm_port: int = 0,
    device_taint_eviction: bool = True,
) -> Handle:
    """Start a kubesim API server in background threads; the kubeconfig is written last.
    `token_auth_file`: CSV `token,user,uid[,"group1,group2"]` of more users (RBAC applies to
    them; the `token` user is in system:masters). `kubelet=False`: no simulated kubelet.
    `anonymous_auth=False`: a request without a token is 401 rather than system:anonymous.
    `dcgm_port`: where the nodes' dcgm-exporters answer (plain HTTP, 0 = any free port).
    `device_taint_eviction=False`: no device taint eviction controller (a cluster whose
    kube-controller-manager runs without DRADeviceTaints; kubesim takes the feature as on)."""
    from kubesim.registry.kinds import KINDS
    from kubesim.registry.kinds import kueue as kueue_kinds

    token = token or secrets.token_urlsafe(24)
    static_users = read_token_file(token_auth_file) if token_auth_file else {}
    store = Store(state_path=state)
    cluster = load_topology(topology)
    fresh = not store.has_objects("", "nodes")  # a --state file brings its own workloads
    _bootstrap(store, KINDS, cluster, k8s_version, tuple(served_versions))
    api = Api(
        store=store,
        kinds=KINDS,
        served_versions=tuple(served_versions),
        k8s_version=k8s_version,
        faults=Faults(),
    )
    api.authenticator = Authenticator(store, KINDS, token, static_users, anonymous=anonymous_auth)
    api.quota = QuotaController(store, KINDS)
    api.pod_security_defaults = cluster.pod_security
    api.optional_groups = kueue_kinds.served_groups(cluster.kueue)
    Aggregator(store, KINDS)
    bundle = certs.generate((host,))
    server = ApiServer((host, port), api, api.authenticator, bundle)
    url = _url(server, api)
    scheduler, api.kubelet = _controllers(store, cluster, speed, k8s_version, kubelet, api.faults)
    finalizer = NamespaceFinalizer(store, KINDS, speed=speed)
    finalizer.start()
    accounts = ServiceAccountsController(store, KINDS).start()
    root_ca = RootCAPublisher(store, KINDS, bundle.ca_pem).start()
    node_lifecycle = NodeLifecycle(store, KINDS).start()
    jobs = JobController(store, speed, cluster.pod_security, api.pod_security_audit).start()
    ttl = TTLAfterFinished(store, speed).start()
    garbage = GarbageCollector(store, KINDS).start()
    stoppables = [scheduler, *([api.kubelet] if api.kubelet else []), finalizer, accounts]
    stoppables += [root_ca, node_lifecycle, jobs, ttl, garbage]
    if device_taint_eviction:
        stoppables.append(DeviceTaintEviction(store, speed).start())
    stoppables += [_StateSaver(store)] if state else []
    dcgm = DcgmExporters((host, dcgm_port), api).start()
    stoppables.append(dcgm)
    serve_in_thread(server)
    if fresh:  # what other teams run was there before any fault a client meets
        workloads.start(api, cluster.workloads)
    _add_initial_faults(api.faults, latency_ms, error_rate, error_codes)
    temporary = kubeconfig is None
    kubeconfig = kubeconfig or _temporary_path()
    write_kubeconfig(kubeconfig, kubeconfig_text(url, bundle.ca_pem, token))
    handle = Handle(url, kubeconfig, token, bundle.ca_pem, api, server, stoppables, temporary)
    handle.dcgm = dcgm
    return handle


def spawn(
    kubeconfig: str | os.PathLike, *args: str, timeout: float = 30, **popen: Any
) -> subprocess.Popen:
    """Run `python -m kubesim serve --port 0 --kubeconfig PATH ARGS...` in its own process and
    return it once it answers (its kubeconfig exists); `popen` goes to subprocess.Popen."""
    path = os.fspath(kubeconfig)
    if os.path.exists(path):
        os.unlink(path)
    command = [sys.executable, "-m", "kubesim", "serve", "--port", "0", "--kubeconfig", path]
    process = subprocess.Popen([*command, *args], **popen)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            output = process.communicate()[0] if popen.get("stdout") == subprocess.PIPE else ""
            raise RuntimeError(f"kubesim did not start: {output}")
        time.sleep(0.02)
    return process
