"""spec.activeDeadlineSeconds: validated as upstream, enforced by the kubelet from startTime."""

import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import kubesim
from kubesim.cluster.topology import DEFAULT_PULL_SECONDS
from kubesim.kubelet import deadline
from tests.fixtures.kubesim import api_client, create_namespace, wait_until

UNKNOWN_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectorad"
VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEADLINE_EVENT = ("Normal", "DeadlineExceeded", deadline.MESSAGE)


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=50)
    yield handle
    handle.stop()


@pytest.fixture
def core(cluster: kubesim.Handle) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(cluster))


@pytest.fixture
def namespace(cluster: kubesim.Handle) -> str:
    return create_namespace(cluster, "deadline")


def pod_body(name: str, image: str, *, gpus: int = 0, **spec: Any) -> dict:
    container: dict = {"name": "ctr0", "image": image}
    body: dict = {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}
    if gpus:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    return body


def create_claim(core: client.CoreV1Api, namespace: str, name: str, count: int = 1) -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    claim = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
    client.ResourceV1Api(core.api_client).create_namespaced_resource_claim(namespace, claim)


def phase(core: client.CoreV1Api, namespace: str, name: str, wanted: str) -> Any:
    def check() -> Any:
        pod = core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase == wanted else None

    return wait_until(check, timeout=20)


def events_of(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[str, str, str]]:
    listed = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [(e.type, e.reason, e.message) for e in listed.items]


def waiting_reasons(cluster: kubesim.Handle, namespace: str, name: str) -> list[str]:
    """Every waiting reason the pod's container reports from now on, in order."""
    seen: list[str] = []
    lock = threading.Lock()

    def record(event: str, ref: Any, obj: dict) -> None:
        meta = obj.get("metadata", {})
        if ref.plural != "pods" or (meta.get("namespace"), meta.get("name")) != (namespace, name):
            return
        for status in (obj.get("status") or {}).get("containerStatuses") or []:
            reason = status["state"].get("waiting", {}).get("reason")
            with lock:
                if reason and reason not in seen:
                    seen.append(reason)

    cluster.store.subscribe(record)
    return seen


def test_a_pod_stuck_in_image_pull_back_off_ends_failed_by_its_deadline(
    cluster: kubesim.Handle, core: client.CoreV1Api, namespace: str
) -> None:
    seen = waiting_reasons(cluster, namespace, "stuck")
    core.create_namespaced_pod(
        namespace, pod_body("stuck", UNKNOWN_IMAGE, restartPolicy="Never", activeDeadlineSeconds=20)
    )
    pod = phase(core, namespace, "stuck", "Failed")
    assert "ImagePullBackOff" in seen
    assert (pod.status.reason, pod.status.message) == (deadline.REASON, deadline.MESSAGE)
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.reason, terminated.exit_code, terminated.message) == (
        "ContainerStatusUnknown",
        137,
        "The container could not be located when the pod was terminated",
    )
    assert DEADLINE_EVENT in events_of(core, namespace, "stuck")
    ready = {c.type: c for c in pod.status.conditions}["Ready"]
    assert (ready.status, ready.reason) == ("False", "PodFailed")
    result = subprocess.run(
        [
            *("kubectl", "--kubeconfig", cluster.kubeconfig, "-n", namespace, "get", "pod"),
            *("stuck", "-o", "jsonpath={.status.phase}/{.status.reason}"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == "Failed/DeadlineExceeded"


def test_a_deadline_set_on_a_running_pod_ends_it_and_frees_its_gpu(
    core: client.CoreV1Api, namespace: str
) -> None:
    create_claim(core, namespace, "looping")
    core.create_namespaced_pod(namespace, pod_body("looping", VECTOR_ADD, gpus=1))
    phase(core, namespace, "looping", "Running")
    core.patch_namespaced_pod("looping", namespace, {"spec": {"activeDeadlineSeconds": 1}})
    pod = phase(core, namespace, "looping", "Failed")
    assert pod.status.reason == deadline.REASON
    assert all(s.state.terminated is not None for s in pod.status.container_statuses)
    assert DEADLINE_EVENT in events_of(core, namespace, "looping")
    resource = client.ResourceV1Api(core.api_client)
    wait_until(
        lambda: (
            resource.read_namespaced_resource_claim("looping", namespace).status.allocation is None
        ),
        timeout=10,
    )


def test_a_pod_never_scheduled_is_not_affected(
    cluster: kubesim.Handle, core: client.CoreV1Api, namespace: str
) -> None:
    create_claim(core, namespace, "huge", count=99)
    core.create_namespaced_pod(
        namespace, pod_body("huge", VECTOR_ADD, gpus=1, activeDeadlineSeconds=1)
    )
    wait_until(lambda: any(e[1] == "FailedScheduling" for e in events_of(core, namespace, "huge")))
    core.create_namespaced_pod(
        namespace, pod_body("placed", UNKNOWN_IMAGE, activeDeadlineSeconds=1)
    )
    phase(core, namespace, "placed", "Failed")  # a later pod with the same deadline is over
    pod = core.read_namespaced_pod("huge", namespace)
    assert (pod.status.phase, pod.status.start_time, pod.status.reason) == ("Pending", None, None)
    assert DEADLINE_EVENT not in events_of(core, namespace, "huge")


def test_a_running_container_is_stopped_then_killed_after_its_grace_period() -> None:
    """At speed 1: pulled after 3 s (the default first pull), the sample would run until 6 s;
    the deadline at 4 s stops it and the 1 s grace period ends with SIGKILL at 5 s (a CUDA
    sample ignores SIGTERM)."""
    with kubesim.start(speed=1) as handle:
        core = client.CoreV1Api(api_client(handle))
        namespace = create_namespace(handle, "kill")
        create_claim(core, namespace, "kill")
        deadline = int(DEFAULT_PULL_SECONDS) + 1
        body = pod_body(
            "kill",
            VECTOR_ADD,
            gpus=1,
            activeDeadlineSeconds=deadline,
            terminationGracePeriodSeconds=1,
        )
        core.create_namespaced_pod(namespace, body)
        pod = phase(core, namespace, "kill", "Failed")
        terminated = pod.status.container_statuses[0].state.terminated
        assert (terminated.exit_code, terminated.reason) == (137, "Error")
        reasons = [e[1] for e in events_of(core, namespace, "kill")]
        assert reasons.index("DeadlineExceeded") < reasons.index("Killing")
        assert ("Normal", "Killing", "Stopping container ctr0") in events_of(
            core, namespace, "kill"
        )


def invalid(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422
    return json.loads(caught.value.body)["message"]


def test_the_deadline_is_validated_as_upstream(core: client.CoreV1Api, namespace: str) -> None:
    body = pod_body("zero", VECTOR_ADD, activeDeadlineSeconds=0)
    assert invalid(lambda: core.create_namespaced_pod(namespace, body)) == (
        'Pod "zero" is invalid: spec.activeDeadlineSeconds: Invalid value: 0: '
        "must be between 1 and 2147483647, inclusive"
    )
    create_claim(core, namespace, "held", count=99)  # never scheduled: the spec stays put
    core.create_namespaced_pod(
        namespace, pod_body("held", VECTOR_ADD, gpus=1, activeDeadlineSeconds=60)
    )
    longer = {"spec": {"activeDeadlineSeconds": 61}}
    assert invalid(lambda: core.patch_namespaced_pod("held", namespace, longer)) == (
        'Pod "held" is invalid: spec.activeDeadlineSeconds: Invalid value: 61: '
        "must be less than or equal to previous value"
    )
    removed = {"spec": {"activeDeadlineSeconds": None}}
    assert invalid(lambda: core.patch_namespaced_pod("held", namespace, removed)) == (
        'Pod "held" is invalid: spec.activeDeadlineSeconds: Invalid value: null: '
        "must not update from a positive integer to nil value"
    )
    shorter = core.patch_namespaced_pod("held", namespace, {"spec": {"activeDeadlineSeconds": 30}})
    assert shorter.spec.active_deadline_seconds == 30
