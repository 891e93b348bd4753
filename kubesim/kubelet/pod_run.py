"""One pod's life on its node, as the kubelet's SyncPod runs it, container by container.

Each container's image is ensured as pkg/kubelet/images/image_manager.go (v1.34) does it: the
pull policy against what the node holds (`images.NodeImages`), one pull at a time per node,
each taking the topology's time for the image; a pull goes through `images.pull` (registries,
mirrors, pull secrets); a failed pull is retried after the image back-off (10 s doubling to
300 s) until it succeeds, the pod is deleted, or the active deadline (`deadline.py`) ends
the pod. Every duration is simulated: wall-clock seconds divided by the kubelet's `speed`.
"""

import hashlib
import math
import time
from typing import Any

from kubesim.base.errors import ApiError
from kubesim.kubelet import deadline, images, pod_status, pod_termination, programs
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import KUBELET, record_write
from kubesim.registry.reservations import (
    allocation_results,
    claim_names_by_pod_claim,
    pod_claims,
    record_event,
)

PODS, SECRETS = kind_for("", "pods"), kind_for("", "secrets")
RUN_SECONDS = 3.0
NEXT_SYNC_SECONDS = 2.0  # from a failed pull to the sync that finds it in back-off
FAILED_PULL_SECONDS = 1.0  # a registry answering "not found" (or denying) does so quickly
PRESENT_PULL_SECONDS = 0.5  # a pull (policy Always) of an image the node holds: manifests only
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10.0, 300.0  # crash-loop and image pull back-off
POLL_SECONDS = 0.1  # wall time between looks at the pod's deadline while sleeping


class PodGone(Exception):
    """The pod was deleted (or replaced by a new one with the same name)."""


class PodRun:
    """The life of one pod on its node, container by container, in lockstep."""

    def __init__(self, kubelet: Any, key: tuple[str, str], uid: str) -> None:
        self.kubelet, self.key, self.uid = kubelet, key, uid
        self.store = kubelet.store
        pod = self._pod()
        self.node = pod["spec"].get("nodeName", "")
        self.containers = [c for c in pod["spec"].get("containers") or []]
        self.restart_policy = pod["spec"].get("restartPolicy", "Always")
        self.devices = container_devices(self.store, kubelet.topology, pod)
        self.states = {c["name"]: pod_status.waiting("ContainerCreating") for c in self.containers}
        self.last_states: dict[str, dict] = {}
        self.restarts = {c["name"]: 0 for c in self.containers}
        self.start_time = pod_status.now()
        self.started = time.monotonic()  # status.startTime, on the clock the deadline uses
        self.results: dict[str, programs.Program] = {}
        self.started_at: dict[str, float] = {}  # when each running container's process began
        self.ends: dict[str, float] = {}  # when each running container's process exits
        self.pull_errors: dict[str, str] = {}
        self.runnable: list[dict] = []
        self.failure: tuple[str, str] | None = None  # the pod's status reason and message

    def _pod(self, copy: bool = True) -> dict:
        try:
            pod = self.store.get(PODS, *self.key, copy=copy)
        except ApiError:
            raise PodGone from None
        if pod["metadata"]["uid"] != self.uid:
            raise PodGone
        return pod

    def write(self) -> dict:
        for _ in range(5):
            pod = self._pod()
            status = pod_status.build(pod, self)
            updated = {**pod, "metadata": dict(pod["metadata"]), "status": status}
            record_write(PODS, pod, updated, KUBELET, "status")
            try:
                return self.store.update(PODS, updated)
            except ApiError as error:
                if error.code != 409:
                    raise PodGone from None
        raise PodGone

    def event(self, event_type: str, reason: str, message: str) -> None:
        try:
            record_event(self.store, self._pod(), event_type, reason, message, component="kubelet")
        except ApiError:
            return

    def sleep(self, seconds: float) -> None:
        """Simulated time passing; past the pod's active deadline it raises deadline.Exceeded,
        once the pod is deleted pod_termination.Deleted."""
        end = time.monotonic() + seconds / self.kubelet.speed
        while True:
            pod = self._pod(copy=False)
            pod_termination.check(pod)
            due = deadline.due(pod, self.started, self.kubelet.speed)
            now = time.monotonic()
            if due is not None and now >= due:
                raise deadline.Exceeded
            if now >= end:
                return
            self.kubelet.wait(min(end, due or end, now + POLL_SECONDS) - now)

    def run(self) -> None:
        """Like the kubelet's SyncPod: pull, create and start each container in order."""
        try:
            self._wait_for_reserved_claims()
            self.write()
            self._sync()
        except deadline.Exceeded:
            deadline.end(self)
        except pod_termination.Deleted:
            pod_termination.end(self)

    def _sync(self) -> None:
        failed = self._pull_round(self.containers)
        backoff = BACKOFF_SECONDS
        while True:
            self._run_rounds()
            if not failed:
                return
            failed = self._retry_pulls(failed, backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _pull_round(self, containers: list[dict]) -> list[dict]:
        """Ensure the image of and start `containers` in order, the status written after each
        (a started container runs while the next image pulls); the ones whose image could
        not be had come back."""
        auths = self._pull_credentials()
        failed = []
        for container in containers:
            if self._ensure_image(container, auths):
                self._start(container)
                self.runnable.append(container)
            else:
                failed.append(container)
            self.write()
        return failed

    def _retry_pulls(self, failed: list[dict], backoff: float) -> list[dict]:
        self.sleep(NEXT_SYNC_SECONDS)  # the next sync finds the image in back-off
        self._back_off_pulls([c for c in failed if self._policy(c) != "Never"])
        self.sleep(max(backoff - NEXT_SYNC_SECONDS, 0.0))
        return self._pull_round(failed)

    def _run_rounds(self) -> None:
        while self.runnable:
            self.runnable = self._end_round(self.runnable)
            auths = self._pull_credentials() if self.runnable else []
            for container in self.runnable:
                self._ensure_image(container, auths)  # it pulled before: it pulls again
                self._start(container)
            self.write()

    def _pull_credentials(self) -> list[str]:
        """The pod's pull secrets' registry locations (getPullSecretsForPod + keyring)."""
        pod = self._pod()
        names = [
            reference["name"]
            for reference in pod["spec"].get("imagePullSecrets") or []
            if isinstance(reference, dict) and reference.get("name")
        ]
        found, missing = [], []
        for name in names:
            try:
                found.append(self.store.get(SECRETS, self.key[0], name))
            except ApiError:
                missing.append(name)
        if missing:
            message = (
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed."
            )
            self.event("Warning", "FailedToRetrieveImagePullSecret", message)
        return images.auth_locations(found)

    @staticmethod
    def _policy(container: dict) -> str:
        return container.get("imagePullPolicy") or "IfNotPresent"

    def _ensure_image(self, container: dict, auths: list[str]) -> bool:
        """EnsureImageExists: the image the node holds, or a pull, as the policy says."""
        image, node = container.get("image", ""), self.node
        present = self.kubelet.node_images.present(node, image)
        policy = self._policy(container)
        if policy == "Never" or (policy == "IfNotPresent" and present):
            if present:
                message = f'Container image "{image}" already present on machine'
                self.event("Normal", "Pulled", message)
                return True
            self._fail_never_pull(container)
            return False
        return self._pull(container, auths, present)

    def _pull(self, container: dict, auths: list[str], present: bool) -> bool:
        image, topology = container.get("image", ""), self.kubelet.topology
        self.event("Normal", "Pulling", f'Pulling image "{image}"')
        asked = time.monotonic()
        puller = self.kubelet.node_images.puller(self.node)
        while not puller.acquire(timeout=POLL_SECONDS):
            self.sleep(0)  # waiting behind another pod's pull; ends if this pod goes
        try:
            started = time.monotonic()
            result = images.pull(topology, image, auths)
            seconds = topology.image_pull_seconds_of(image)
            if not result.ok:
                seconds = min(seconds, FAILED_PULL_SECONDS)
            elif present:
                seconds = min(seconds, PRESENT_PULL_SECONDS)
            self.sleep(seconds)
        finally:
            puller.release()
        if not result.ok:
            self._fail_pull(container, result.error)
            return False
        self.kubelet.node_images.add(self.node, image)
        took, waited = (self._simulated_since(t) for t in (started, asked))
        message = f'Successfully pulled image "{image}" in {took} ({waited} including waiting).'
        size = topology.image_sizes.get(images.parse(image).full) or image_size(image)
        self.event("Normal", "Pulled", f"{message} Image size: {size} bytes.")
        return True

    def _simulated_since(self, moment: float) -> str:
        """Simulated time since `moment`, as Go prints a Duration truncated to milliseconds."""
        seconds = (time.monotonic() - moment) * self.kubelet.speed
        return go_duration(math.floor(seconds * 1000) / 1000)

    def _fail_never_pull(self, container: dict) -> None:
        image, name = container.get("image", ""), container["name"]
        message = f'Container image "{image}" is not present with pull policy of Never'
        self.states[name] = pod_status.waiting("ErrImageNeverPull", message)
        self.event("Warning", "ErrImageNeverPull", message)
        self.event("Warning", "Failed", "Error: ErrImageNeverPull")

    def _fail_pull(self, container: dict, error: str) -> None:
        image, name = container.get("image", ""), container["name"]
        self.pull_errors[name] = error
        self.states[name] = pod_status.waiting("ErrImagePull", error)
        self.event("Warning", "Failed", f'Failed to pull image "{image}": {error}')
        self.event("Warning", "Failed", "Error: ErrImagePull")

    def _back_off_pulls(self, failed: list[dict]) -> None:
        for container in failed:
            name = container["name"]
            message = f'Back-off pulling image "{container.get("image", "")}"'
            self.event("Normal", "BackOff", message)
            self.event("Warning", "Failed", "Error: ImagePullBackOff")
            detail = f"{message}: ErrImagePull: {self.pull_errors[name]}"
            self.states[name] = pod_status.waiting("ImagePullBackOff", detail)
        if failed:
            self.write()

    def _start(self, container: dict) -> None:
        """Create and start one container: what its image does (programs.py), printing as
        it goes."""
        name = container["name"]
        self.event("Normal", "Created", f"Created container: {name}")
        self.event("Normal", "Started", f"Started container {name}")
        self.states[name] = pod_status.running()
        registries = self.kubelet.topology.registries
        program = programs.start(container, self.devices.get(name, []), registries, RUN_SECONDS)
        self.results[name] = program
        self.started_at[name] = time.monotonic()
        self.ends[name] = self.started_at[name] + program.seconds / self.kubelet.speed
        devices = self.devices.get(name, [])
        self.kubelet.gpu_metrics.started(
            (*self.key, name), self.uid, devices, program, self.ends[name]
        )
        if program.server is not None:
            self.kubelet.servers[(*self.key, name)] = program.server
        self.kubelet.append_logs((*self.key, name), program.due(0.0))

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
            self.sleep(0.05 * self.kubelet.speed)
            pod = self._pod()

    def _end_round(self, runnable: list[dict]) -> list[dict]:
        """Let the started containers run, printing as they go, until each has exited (a
        server runs until the pod ends); the ones to restart come back."""
        speed, running = self.kubelet.speed, {c["name"] for c in runnable}
        while running:
            moments = [self.ends[n] for n in running] + [
                self.started_at[n] + self.results[n].next_line_at() / speed for n in running
            ]
            self.sleep(max(min(moments) - time.monotonic(), 0.0) * speed)
            now = time.monotonic()
            for name in running:
                elapsed = (now - self.started_at[name]) * speed
                self.kubelet.append_logs((*self.key, name), self.results[name].due(elapsed))
            ended = {name for name in running if self.ends[name] <= now}
            for name in ended:
                started = self.states[name]["running"]["startedAt"]
                self.states[name] = pod_status.terminated(self.results[name].exit_code, started)
            if ended:
                self.write()
            running -= ended
        again = [c for c in runnable if self._restarts(self.results[c["name"]].exit_code)]
        if again:
            restarts = max(self.restarts[c["name"]] for c in again)
            self.sleep(min(BACKOFF_SECONDS * 2**restarts, MAX_BACKOFF_SECONDS))
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
        devices += _extended_devices(topology, pod, claims, container["name"], devices)
        seen[container["name"]] = devices
    return seen


def _extended_devices(
    topology: Any, pod: dict, claims: dict[str, dict], container: str, have: list
) -> list:
    """The devices the scheduler's extended-resource claim gives the container, by the
    pod's status.extendedResourceClaimStatus.requestMappings."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    claim = claims.get(status.get("resourceClaimName") or "")
    wanted = {
        m.get("requestName")
        for m in status.get("requestMappings") or []
        if m.get("containerName") == container
    }
    found: list = []
    for result in allocation_results(claim) if wanted else []:
        device = topology.device(result["pool"], result["device"])
        if result["request"] in wanted and device is not None and device not in have + found:
            found.append(device)
    return found
