"""The simulated kubelet: phases, container statuses, restart policies, pulls and logs."""

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

import kubesim
from kubesim.kubelet import pod_status
from kubesim.kubelet.kubelet import go_duration
from tests.fixtures.kubesim import create_namespace, wait_until

VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEVICE_QUERY = "nvcr.io/nvidia/k8s/cuda-sample:devicequery"


@pytest.fixture
def namespace(kubesim_module: kubesim.Handle) -> str:
    name = create_namespace(kubesim_module, "kubelet")
    return name


class PodHistory:
    """Every version of one pod the store commits, in order."""

    def __init__(self, cluster: kubesim.Handle, namespace: str, name: str) -> None:
        self.versions: list[dict] = []
        self._lock = threading.Lock()

        def record(event: str, ref: Any, obj: dict) -> None:
            meta = obj.get("metadata", {})
            if ref.plural == "pods" and (meta.get("namespace"), meta.get("name")) == (
                namespace,
                name,
            ):
                with self._lock:
                    self.versions.append(obj)

        cluster.store.subscribe(record)

    def caught_up_with(self, pod: dict) -> bool:
        """Whether the version read has reached the history too: the store tells its
        subscribers after it commits, on the writer's thread, so a read may see it first."""
        version = pod["metadata"]["resourceVersion"]
        with self._lock:
            return any(v["metadata"]["resourceVersion"] == version for v in self.versions)

    def phases(self) -> list[str]:
        with self._lock:
            phases = [v.get("status", {}).get("phase") for v in self.versions]
        return [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]

    def waiting_reasons(self, container: str) -> list[str]:
        reasons = []
        with self._lock:
            for version in self.versions:
                for status in version.get("status", {}).get("containerStatuses") or []:
                    reason = status["state"].get("waiting", {}).get("reason")
                    if status["name"] == container and reason and reason not in reasons:
                        reasons.append(reason)
        return reasons


def create_claim(cluster: kubesim.Handle, namespace: str, name: str, count: int = 1) -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    body = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
    cluster.admin("POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", body)


def create_pod(
    cluster: kubesim.Handle,
    namespace: str,
    name: str,
    images: list[str],
    *,
    claim: str | None = None,
    policy: str = "Never",
) -> None:
    containers = []
    for index, image in enumerate(images):
        container: dict = {"name": f"ctr{index}", "image": image}
        if claim:
            container["resources"] = {"claims": [{"name": "gpu"}]}
        containers.append(container)
    spec: dict = {"restartPolicy": policy, "containers": containers}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    cluster.admin(
        "POST", f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": name}, "spec": spec}
    )


def get_pod(cluster: kubesim.Handle, namespace: str, name: str) -> dict:
    return cluster.admin("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")


def phase_is(
    cluster: kubesim.Handle, namespace: str, name: str, phase: str
) -> Callable[[], dict | None]:
    def check() -> dict | None:
        pod = get_pod(cluster, namespace, name)
        return pod if pod["status"].get("phase") == phase else None

    return check


def conditions(pod: dict) -> dict[str, dict]:
    return {c["type"]: c for c in pod["status"]["conditions"]}


def test_it_runs_a_pod_from_pending_to_succeeded(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    history = PodHistory(kubesim_module, namespace, "pod1")
    create_claim(kubesim_module, namespace, "gpu-claim")
    create_pod(kubesim_module, namespace, "pod1", [VECTOR_ADD, DEVICE_QUERY], claim="gpu-claim")
    pod = wait_until(phase_is(kubesim_module, namespace, "pod1", "Succeeded"))
    wait_until(lambda: history.caught_up_with(pod))
    assert history.phases() == ["Pending", "Running", "Succeeded"]
    assert history.waiting_reasons("ctr0") == ["ContainerCreating"]
    assert pod["status"]["startTime"]
    for status in pod["status"]["containerStatuses"]:
        terminated = status["state"]["terminated"]
        assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
        assert terminated["startedAt"] <= terminated["finishedAt"]
        assert status["restartCount"] == 0 and status["ready"] is False
        assert status["containerID"].startswith("containerd://")
    found = conditions(pod)
    assert {"Initialized", "Ready", "ContainersReady", "PodScheduled"} <= set(found)
    assert found["Initialized"]["status"] == found["PodScheduled"]["status"] == "True"
    assert found["Ready"]["status"] == "False" and found["Ready"]["reason"] == "PodCompleted"
    events = kubesim_module.admin("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == "pod1"]
    assert {"Scheduled", "Pulling", "Pulled", "Created", "Started"} <= set(reasons)
    assert "Started container ctr1" in [e["message"] for e in events]


def test_it_reports_running_containers_as_ready(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "forever")
    create_pod(kubesim_module, namespace, "forever", [VECTOR_ADD], claim="forever", policy="Always")

    def container_running() -> dict | None:
        # vectorAdd exits within a second and restarts (restartPolicy Always): look at a
        # moment its container runs, not merely at the phase, which stays Running between.
        pod = get_pod(kubesim_module, namespace, "forever")
        statuses = pod["status"].get("containerStatuses") or [{}]
        return pod if "running" in statuses[0].get("state", {}) else None

    pod = wait_until(container_running)
    (status,) = pod["status"]["containerStatuses"]
    assert pod["status"]["phase"] == "Running" and status["ready"] is True
    assert conditions(pod)["ContainersReady"]["status"] == "True"


def test_it_fails_a_pull_of_an_unknown_image(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    history = PodHistory(kubesim_module, namespace, "typo")
    create_pod(kubesim_module, namespace, "typo", ["nvcr.io/nvidia/k8s/cuda-sample:vectorad"])

    def backing_off() -> dict | None:
        pod = get_pod(kubesim_module, namespace, "typo")
        state = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {})
        return pod if state.get("waiting", {}).get("reason") == "ImagePullBackOff" else None

    pod = wait_until(backing_off)
    wait_until(lambda: history.caught_up_with(pod))
    assert pod["status"]["phase"] == "Pending"
    assert history.waiting_reasons("ctr0") == [
        "ContainerCreating",
        "ErrImagePull",
        "ImagePullBackOff",
    ]
    reference = "nvcr.io/nvidia/k8s/cuda-sample:vectorad"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"] == (
        f'Back-off pulling image "{reference}": ErrImagePull: rpc error: code = NotFound '
        f'desc = failed to pull and unpack image "{reference}": failed to resolve reference '
        f'"{reference}": {reference}: not found'
    )


def test_it_fails_a_never_restarting_pod_whose_container_fails(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_pod(kubesim_module, namespace, "nogpu", [VECTOR_ADD])
    pod = wait_until(phase_is(kubesim_module, namespace, "nogpu", "Failed"))
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 1 and terminated["reason"] == "Error"
    lines = [text for _, text in kubesim_module.api.kubelet.logs(namespace, "nogpu", "ctr0")]
    assert lines[-1].startswith("Failed to allocate device vector A")


def test_it_restarts_a_failed_container_on_failure(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_pod(kubesim_module, namespace, "retry", [DEVICE_QUERY], policy="OnFailure")

    def restarted() -> dict | None:
        pod = get_pod(kubesim_module, namespace, "retry")
        statuses = pod["status"].get("containerStatuses") or [{}]
        return pod if statuses[0].get("restartCount", 0) >= 1 else None

    pod = wait_until(restarted)
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_it_restarts_a_completed_container_when_always(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "always")
    create_pod(kubesim_module, namespace, "always", [VECTOR_ADD], claim="always", policy="Always")

    def restarted() -> dict | None:
        pod = get_pod(kubesim_module, namespace, "always")
        statuses = pod["status"].get("containerStatuses") or [{}]
        return pod if statuses[0].get("restartCount", 0) >= 1 else None

    pod = wait_until(restarted)
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "Completed"


def test_it_names_every_allocated_gpu_in_device_query(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "two", count=2)
    create_pod(kubesim_module, namespace, "two", [DEVICE_QUERY, DEVICE_QUERY], claim="two")
    pod = wait_until(phase_is(kubesim_module, namespace, "two", "Succeeded"))
    product = (
        "NVIDIA H100 80GB HBM3"
        if pod["spec"]["nodeName"] == "gpu-node-1"
        else "NVIDIA A100-SXM4-40GB"
    )
    ctr0 = [text for _, text in kubesim_module.api.kubelet.logs(namespace, "two", "ctr0")]
    ctr1 = [text for _, text in kubesim_module.api.kubelet.logs(namespace, "two", "ctr1")]
    assert "Detected 2 CUDA Capable device(s)" in ctr0
    assert f'Device 1: "{product}"' in ctr0
    assert ctr0 == ctr1  # both containers share the one claim, so they see the same GPUs


def test_it_serves_logs_with_timestamps(kubesim_module: kubesim.Handle, namespace: str) -> None:
    create_claim(kubesim_module, namespace, "logs")
    create_pod(kubesim_module, namespace, "logs", [VECTOR_ADD], claim="logs")
    wait_until(phase_is(kubesim_module, namespace, "logs", "Succeeded"))
    lines = kubesim_module.api.kubelet.logs(namespace, "logs", "ctr0")
    assert [text for _, text in lines][-2:] == ["Test PASSED", "Done"]
    assert all(stamp.tzinfo is not None for stamp, _ in lines)
    stamps = [stamp for stamp, _ in lines]
    assert stamps == sorted(set(stamps))  # strictly increasing, so "lines after X" is exact
    core = client.CoreV1Api(config.new_client_from_config(kubesim_module.kubeconfig))
    text = core.read_namespaced_pod_log("logs", namespace, timestamps=True)
    first = text.splitlines()[0]
    assert first.endswith(" [Vector addition of 50000 elements]")
    assert first[10] == "T" and first[29] == "Z"


def test_it_wakes_a_log_follower_when_lines_arrive(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    kubelet = kubesim_module.api.kubelet
    assert kubelet.wait_for_log_change(namespace, "late", "ctr0", 0, 0.05) is False
    create_claim(kubesim_module, namespace, "late")
    create_pod(kubesim_module, namespace, "late", [VECTOR_ADD], claim="late")
    assert kubelet.wait_for_log_change(namespace, "late", "ctr0", 0, 5.0) is True
    assert len(kubelet.logs(namespace, "late", "ctr0")) == 6


def test_it_starts_the_pods_of_a_saved_cluster_again(tmp_path: Path) -> None:
    state = str(tmp_path / "kubesim_module.json")
    first = kubesim.start(speed=20, state=state)
    try:
        first.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "saved"}})
        create_claim(first, "saved", "kept")
        create_pod(first, "saved", "kept", [VECTOR_ADD], claim="kept", policy="Always")
        wait_until(phase_is(first, "saved", "kept", "Running"))
    finally:
        first.stop()
    second = kubesim.start(speed=20, state=state)
    try:
        assert wait_until(lambda: second.api.kubelet.logs("saved", "kept", "ctr0"))
        pod = wait_until(phase_is(second, "saved", "kept", "Running"))
        claim = second.admin("GET", "/apis/resource.k8s.io/v1/namespaces/saved/resourceclaims/kept")
        assert claim["status"]["reservedFor"][0]["uid"] == pod["metadata"]["uid"]
    finally:
        second.stop()


def test_it_ends_its_pod_threads_when_the_cluster_stops() -> None:
    handle = kubesim.start(speed=20)
    handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "stopping"}})
    create_pod(handle, "stopping", "looping", [DEVICE_QUERY], policy="Always")
    wait_until(phase_is(handle, "stopping", "looping", "Running"))
    handle.stop()

    def pod_threads() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == "kubesim-pod-stopping/looping"]

    wait_until(lambda: not pod_threads(), timeout=2.0)


def test_it_prints_durations_as_go_does() -> None:
    assert go_duration(1.5) == "1.5s"
    assert go_duration(2.000123456) == "2.000123456s"
    assert go_duration(0.0510845123) == "51.084512ms"


def test_it_owns_the_status_it_writes_as_the_kubelet(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "owned-claim")
    create_pod(kubesim_module, namespace, "owned", [VECTOR_ADD], claim="owned-claim")
    pod = wait_until(phase_is(kubesim_module, namespace, "owned", "Succeeded"))
    owners = {(e["manager"], e.get("subresource")): e for e in pod["metadata"]["managedFields"]}
    kubelet = owners[("kubelet", "status")]["fieldsV1"]["f:status"]
    assert {"f:containerStatuses", "f:phase", "f:startTime"} <= set(kubelet)
    main_writes = [e for e in pod["metadata"]["managedFields"] if not e.get("subresource")]
    assert main_writes and all("f:status" not in e["fieldsV1"] for e in main_writes)


def test_the_phase_is_decided_as_the_kubelets_get_phase() -> None:
    """pkg/kubelet/kubelet_pods.go getPhase: a container not started yet keeps the pod Pending
    even while another runs (an image that never pulls beside one that did); one waiting to
    restart after it ran counts as stopped."""
    pulling = {"waiting": {"reason": "ErrImagePull"}}
    running = {"running": {"startedAt": "2026-12-02T00:00:00Z"}}
    ok = {"terminated": {"exitCode": 0}}
    failed = {"terminated": {"exitCode": 1}}
    restarting = {"waiting": {"reason": "CrashLoopBackOff"}}
    assert pod_status.phase([pulling, running], "Never") == "Pending"
    assert pod_status.phase([running, ok], "Never") == "Running"
    assert pod_status.phase([ok, ok], "OnFailure") == "Succeeded"
    assert pod_status.phase([ok, failed], "Never") == "Failed"
    assert pod_status.phase([ok, failed], "OnFailure") == "Running"
    assert pod_status.phase([ok, failed], "Always") == "Running"
    assert pod_status.phase([restarting, ok], "OnFailure", [failed, {}]) == "Running"
    assert pod_status.phase([restarting, ok], "OnFailure") == "Pending"
