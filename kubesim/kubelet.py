"""The simulated kubelet: runs bound pods through their phases and keeps container logs.

One thread per pod. Known CUDA sample images print what the real samples print on the
GPUs allocated to the container's claims; any other image fails to pull. Timings are divided
by `speed` (speed 1: about 2 s pulling, 3 s running, so a person can watch).
"""

import hashlib
import logging
import queue
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim import cuda, pod_status
from kubesim.errors import ApiError
from kubesim.kinds import kind_for
from kubesim.reservations import (
    allocation_results,
    claim_names_by_pod_claim,
    pod_claims,
    record_event,
)

log = logging.getLogger(__name__)

PODS = kind_for("", "pods")
PULL_SECONDS, RUN_SECONDS = 2.0, 3.0
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10.0, 300.0  # the kubelet's crash-loop back-off
LogLine = tuple[datetime, str]


class PodGone(Exception):
    """The pod was deleted (or replaced by a new one with the same name)."""


class Kubelet:
    def __init__(self, store: Any, topology: Any, speed: float = 1.0) -> None:
        self.store = store
        self.topology = topology
        self.speed = max(float(speed or 1.0), 0.001)
        self._logs: dict[tuple[str, str, str], list[LogLine]] = {}
        self._changed = threading.Condition()
        self._running: dict[tuple[str, str], str] = {}
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

    def _append_logs(self, key: tuple[str, str, str], lines: list[str]) -> None:
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
                    target=self._run_pod, args=(key, pod["metadata"]["uid"]), name=name, daemon=True
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
        with self._changed:
            for log_key in [k for k in self._logs if k[:2] == key]:
                del self._logs[log_key]
            self._changed.notify_all()

    # -- one pod ---------------------------------------------------------------------------

    def _run_pod(self, key: tuple[str, str], uid: str) -> None:
        try:
            PodRun(self, key, uid).run()
        except PodGone:
            return
        except Exception:
            log.exception("simulating pod %s/%s failed", *key)

    def sleep(self, seconds: float) -> None:
        """Simulated time passing; a stopped kubelet ends its pods' threads here."""
        if self._stopping.wait(seconds / self.speed):
            raise PodGone


class PodRun:
    """The life of one pod on its node, container by container, in lockstep."""

    def __init__(self, kubelet: Kubelet, key: tuple[str, str], uid: str) -> None:
        self.kubelet, self.key, self.uid = kubelet, key, uid
        self.store = kubelet.store
        pod = self._pod()
        self.containers = [c for c in pod["spec"].get("containers") or []]
        self.restart_policy = pod["spec"].get("restartPolicy", "Always")
        self.devices = container_devices(self.store, kubelet.topology, pod)
        self.states = {c["name"]: pod_status.waiting("ContainerCreating") for c in self.containers}
        self.last_states: dict[str, dict] = {}
        self.restarts = {c["name"]: 0 for c in self.containers}
        self.start_time = pod_status.now()

    def _pod(self) -> dict:
        try:
            pod = self.store.get(PODS, *self.key)
        except ApiError:
            raise PodGone from None
        if pod["metadata"]["uid"] != self.uid:
            raise PodGone
        return pod

    def _write(self) -> dict:
        for _ in range(5):
            pod = self._pod()
            pod["status"] = pod_status.build(pod, self)
            try:
                return self.store.update(PODS, pod)
            except ApiError as error:
                if error.code != 409:
                    raise PodGone from None
        raise PodGone

    def _event(self, event_type: str, reason: str, message: str) -> None:
        try:
            record_event(self.store, self._pod(), event_type, reason, message, component="kubelet")
        except ApiError:
            return

    def known(self, image: str) -> bool:
        return image in self.kubelet.topology.images

    def run(self) -> None:
        """Like the kubelet's SyncPod: pull, create and start each container in order."""
        self._wait_for_reserved_claims()
        self._write()
        pull_seconds = PULL_SECONDS / max(len(self.containers), 1)
        results, unknown = {}, []
        for container in self.containers:
            if self._pull(container, pull_seconds):
                results[container["name"]] = self._start(container)
            else:
                unknown.append(container)
        self._write()
        runnable = [c for c in self.containers if c not in unknown]
        while runnable:
            runnable = self._end_round(runnable, results)
            results = {c["name"]: self._start(c) for c in runnable}
            self._write()
        if unknown:
            self.kubelet.sleep(PULL_SECONDS)
            self._back_off_pulls(unknown)

    def _pull(self, container: dict, seconds: float) -> bool:
        image = container.get("image", "")
        self._event("Normal", "Pulling", f'Pulling image "{image}"')
        started = time.monotonic()
        self.kubelet.sleep(seconds)
        if not self.known(image):
            self._fail_pull(container)
            return False
        took = go_duration(time.monotonic() - started)
        message = f'Successfully pulled image "{image}" in {took} ({took} including waiting).'
        self._event("Normal", "Pulled", f"{message} Image size: {image_size(image)} bytes.")
        return True

    def _back_off_pulls(self, unknown: list[dict]) -> None:
        for container in unknown:
            message = f'Back-off pulling image "{container.get("image", "")}"'
            self.states[container["name"]] = pod_status.waiting("ImagePullBackOff", message)
            self._event("Normal", "BackOff", message)
        self._write()

    def _start(self, container: dict) -> cuda.SampleRun:
        """Create and start one container; its output is in the log at once."""
        name, image = container["name"], container["image"]
        if self.restarts[name]:
            self._event("Normal", "Pulled", f'Container image "{image}" already present on machine')
        self._event("Normal", "Created", f"Created container: {name}")
        self._event("Normal", "Started", f"Started container {name}")
        self.states[name] = pod_status.running()
        result = cuda.run_image(image, self.devices.get(name, []))
        self.kubelet._append_logs((*self.key, name), result.lines)
        return result

    def _wait_for_reserved_claims(self) -> None:
        """A pod starts only once every claim it uses is reserved for it (as the kubelet checks)."""
        pod = self._pod()
        wanted = len(pod["spec"].get("resourceClaims") or [])
        while True:
            claims = pod_claims(self.store, pod)
            reserved = [
                c
                for c in claims
                if any(
                    r.get("uid") == self.uid
                    for r in (c.get("status") or {}).get("reservedFor") or []
                )
            ]
            if len(reserved) == wanted:
                self.devices = container_devices(self.store, self.kubelet.topology, pod)
                return
            self.kubelet.sleep(0.05 * self.kubelet.speed)
            pod = self._pod()

    def _fail_pull(self, container: dict) -> None:
        image = container.get("image", "")
        message = pull_error(image)
        self.states[container["name"]] = pod_status.waiting("ErrImagePull", message)
        self._event("Warning", "Failed", f'Failed to pull image "{image}": {message}')

    def _end_round(self, runnable: list[dict], results: dict) -> list[dict]:
        """Let the started containers run and end; the ones to restart come back."""
        self.kubelet.sleep(RUN_SECONDS)
        for container in runnable:
            name = container["name"]
            started = self.states[name]["running"]["startedAt"]
            self.states[name] = pod_status.terminated(results[name].exit_code, started)
        self._write()
        again = [c for c in runnable if self._restarts(results[c["name"]].exit_code)]
        if again:
            restarts = max(self.restarts[c["name"]] for c in again)
            self.kubelet.sleep(min(BACKOFF_SECONDS * 2**restarts, MAX_BACKOFF_SECONDS))
            for container in again:
                self.last_states[container["name"]] = self.states[container["name"]]
                self.restarts[container["name"]] += 1
        return again

    def _restarts(self, exit_code: int) -> bool:
        return self.restart_policy == "Always" or (
            self.restart_policy == "OnFailure" and exit_code != 0
        )


def go_duration(seconds: float) -> str:
    """`seconds` as Go prints a time.Duration: 1.503261452s, 51.084512ms."""
    if seconds >= 1:
        return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"
    return f"{seconds * 1000:.6f}".rstrip("0").rstrip(".") + "ms"


def image_size(image: str) -> int:
    """A stable size for the image, as the kubelet's Pulled event reports one."""
    return 80_000_000 + int(hashlib.sha256(image.encode()).hexdigest()[:7], 16)


def pull_error(image: str) -> str:
    """containerd's message for a reference the registry does not have."""
    reference = image if "/" in image.split(":")[0] else f"docker.io/library/{image}"
    if ":" not in reference.rsplit("/", 1)[-1] and "@" not in reference:
        reference += ":latest"
    return (
        f'failed to pull and unpack image "{reference}": failed to resolve reference '
        f'"{reference}": {reference}: not found'
    )


def container_devices(store: Any, topology: Any, pod: dict) -> dict[str, list]:
    """The topology devices each container sees, from its claims' allocation results."""
    claim_names = claim_names_by_pod_claim(pod)
    claims = {claim["metadata"]["name"]: claim for claim in pod_claims(store, pod)}
    seen: dict[str, list] = {}
    for container in pod["spec"].get("containers") or []:
        devices: list = []
        for reference in (container.get("resources") or {}).get("claims") or []:
            claim = claims.get(claim_names.get(reference.get("name"), ""))
            wanted = reference.get("request")
            for result in allocation_results(claim):
                if wanted and result["request"].split("/")[0] != wanted:
                    continue
                device = topology.device(result["pool"], result["device"])
                if device is not None and device not in devices:
                    devices.append(device)
        seen[container["name"]] = devices
    return seen
