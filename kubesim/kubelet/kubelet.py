"""The simulated kubelet: runs bound pods through their phases and keeps container logs.

One thread per pod (`pod_run.PodRun`). Known CUDA sample images print what the real samples
print on the GPUs allocated to the container's claims; pulls follow the topology's registries
and pull times, and each node keeps the images it pulled (`images.py`);
`spec.activeDeadlineSeconds` ends a pod (`deadline.py`). Timings are divided by `speed`
(speed 1: 3 s per image on its first pull on a node, 3 s running, so a person can watch).

A node whose kubelet is down or unreachable (a node fault, kubesim/apiserver/faults.py) does
nothing: its pods start no container, report no status and confirm no deletion (a deleted
Pod stays Terminating, its claims reserved) until the fault is cleared.
"""

import logging
import queue
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim.kubelet.gpu_metrics import GpuMetrics
from kubesim.kubelet.images import NodeImages
from kubesim.kubelet.pod_run import (
    PodGone,
    PodRun,
    container_devices,
    go_duration,
    image_size,
)
from kubesim.registry.kinds import kind_for

__all__ = ["Kubelet", "PodGone", "PodRun", "container_devices", "go_duration", "image_size"]

log = logging.getLogger(__name__)

PODS = kind_for("", "pods")
LogLine = tuple[datetime, str]


class Kubelet:
    def __init__(self, store: Any, topology: Any, speed: float = 1.0, faults: Any = None) -> None:
        self.store = store
        self.topology = topology
        self.faults = faults
        self._pod_node = threading.local()  # the node of the pod a thread runs
        self.speed = max(float(speed or 1.0), 0.001)
        self.node_images = NodeImages()
        self.gpu_metrics = GpuMetrics(store, topology)  # what each node's dcgm-exporter reads
        self._logs: dict[tuple[str, str, str], list[LogLine]] = {}
        self._changed = threading.Condition()
        self._running: dict[tuple[str, str], str] = {}
        self.servers: dict[tuple[str, str, str], Any] = {}  # (ns, pod, container): HTTP
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._dispatch, name="kubesim-kubelet", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> "Kubelet":
        pods, _ = self.store.list(PODS)
        for pod in pods:
            self._events.put(("RESUMED", pod))  # pods a saved cluster was running start again
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._events.put(None)
        with self._changed:
            self._changed.notify_all()

    # -- logs ------------------------------------------------------------------------------

    def logs(self, namespace: str, pod: str, container: str) -> list[LogLine]:
        with self._changed:
            return list(self._logs.get((namespace, pod, container), []))

    def wait_for_log_change(
        self, namespace: str, pod: str, container: str, seen: int, timeout: float
    ) -> bool:
        """Wait until the container has more than `seen` lines; False on timeout."""
        key = (namespace, pod, container)
        with self._changed:
            return self._changed.wait_for(
                lambda: len(self._logs.get(key, [])) > seen or self._stopping.is_set(), timeout
            )

    def append_logs(self, key: tuple[str, str, str], lines: list[str]) -> None:
        with self._changed:
            stored = self._logs.setdefault(key, [])
            for line in lines:
                stamp = datetime.now(UTC)
                if stored and stamp <= stored[-1][0]:
                    # Distinct stamps let a reader ask for the lines after one it has seen.
                    stamp = stored[-1][0] + timedelta(microseconds=1)
                stored.append((stamp, line))
            self._changed.notify_all()

    # -- dispatch --------------------------------------------------------------------------

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "pods":
            self._events.put((event, obj))

    def _dispatch(self) -> None:
        while not self._stopping.is_set():
            item = self._events.get()
            if item is None:
                return
            event, pod = item
            key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
            if event == "DELETED":
                self._forget(key, pod["metadata"].get("uid", ""))
            elif self._should_run(key, pod, resumed=event == "RESUMED"):
                self._running[key] = pod["metadata"]["uid"]
                name = f"kubesim-pod-{key[0]}/{key[1]}"
                threading.Thread(
                    target=self._run_pod,
                    args=(key, pod["metadata"]["uid"], pod["spec"]["nodeName"]),
                    name=name,
                    daemon=True,
                ).start()

    def _should_run(self, key: tuple[str, str], pod: dict, resumed: bool = False) -> bool:
        phase = (pod.get("status") or {}).get("phase")
        bound = bool((pod.get("spec") or {}).get("nodeName"))
        started = bool((pod.get("status") or {}).get("startTime")) and not resumed
        if resumed and phase == "Running":
            phase = "Pending"
        return (
            bound
            and not started
            and phase == "Pending"
            and self._running.get(key) != pod["metadata"]["uid"]
        )

    def _forget(self, key: tuple[str, str], uid: str) -> None:
        if self._running.get(key) == uid:
            self._running.pop(key, None)
        self.gpu_metrics.forget(key)
        with self._changed:
            for log_key in [k for k in self._logs if k[:2] == key]:
                del self._logs[log_key]
            for server_key in [k for k in self.servers if k[:2] == key]:
                del self.servers[server_key]
            self._changed.notify_all()

    # -- one pod ---------------------------------------------------------------------------

    def _run_pod(self, key: tuple[str, str], uid: str, node: str) -> None:
        self._pod_node.name = node
        try:
            self.wait_for_node()
            PodRun(self, key, uid).run()
        except PodGone:
            return
        except Exception:
            log.exception("simulating pod %s/%s failed", *key)

    def wait(self, seconds: float) -> None:
        """Wall-clock time passing; a stopped kubelet ends its pods' threads here, and a pod
        whose node's kubelet is down stands still here until it is back."""
        if self._stopping.wait(max(seconds, 0.0)):
            raise PodGone
        self.wait_for_node()

    def wait_for_node(self) -> None:
        """Return once the calling pod thread's node has its kubelet back (at once if it has)."""
        node = getattr(self._pod_node, "name", None)
        while self.faults is not None and node and self.faults.kubelet_fault(node):
            self.faults.wait_for_node_change(1.0)
            if self._stopping.is_set():
                raise PodGone
