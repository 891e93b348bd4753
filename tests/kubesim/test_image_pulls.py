"""Image pulls as a node's kubelet makes them: time per image, a cache per node, pull
policies, one pull at a time (pkg/kubelet/images/image_manager.go, v1.34)."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

import kubesim
from tests.fixtures.kubesim import api_client, create_namespace, wait_until

VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEVICE_QUERY = "nvcr.io/nvidia/k8s/cuda-sample:devicequery"
SLOW = "nvcr.io/nvidia/k8s/cuda-sample:devicequery-cuda12.5.0"
BIG = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.1"
PULLED = re.compile(
    r'Successfully pulled image "(?P<image>[^"]+)" in (?P<took>[0-9.]+m?s) '
    r"\((?P<waited>[0-9.]+m?s) including waiting\)\. Image size: (?P<size>\d+) bytes\."
)
TOPOLOGY = {
    "images": [
        {"image": VECTOR_ADD, "pull_seconds": 10},
        {"image": DEVICE_QUERY, "pull_seconds": 5, "size": 123456789},
        {"image": SLOW, "pull_seconds": 100000},
        {"image": BIG, "pull_seconds": 100},
    ],
    "nodes": [{"name": "gpu-node-1", "gpus": [{"model": "H100-80GB-HBM3", "count": 4}]}],
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[kubesim.Handle]:
    """A cluster of its own: one node whose cache no other test filled."""
    topology = tmp_path / "pulls.yaml"
    topology.write_text(yaml.safe_dump(TOPOLOGY))
    handle = kubesim.start(topology=str(topology), speed=50)
    yield handle
    handle.stop()


@pytest.fixture
def core(cluster: kubesim.Handle) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(cluster))


@pytest.fixture
def namespace(cluster: kubesim.Handle) -> str:
    return create_namespace(cluster, "pulls")


def run_pod(core: client.CoreV1Api, namespace: str, name: str, *images: str, **policy: str) -> None:
    containers = [
        {
            "name": f"ctr{i}",
            "image": image,
            **({"imagePullPolicy": policy["policy"]} if policy else {}),
        }
        for i, image in enumerate(images)
    ]
    spec = {"restartPolicy": "Never", "containers": containers}
    core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})


def events(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[str, str]]:
    listed = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    return [(e.reason, e.message) for e in listed]


def ended(core: client.CoreV1Api, namespace: str, name: str) -> None:
    wait_until(
        lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"),
        timeout=15,
    )


def seconds(duration: str) -> float:
    return float(duration[:-2]) / 1000 if duration.endswith("ms") else float(duration[:-1])


def pulled(core: client.CoreV1Api, namespace: str, name: str, image: str) -> re.Match:
    found = [PULLED.fullmatch(m) for r, m in events(core, namespace, name) if r == "Pulled"]
    (match,) = [m for m in found if m and m["image"] == image]
    return match


def test_it_pulls_creates_and_starts_containers_in_order_as_the_events_list_shows(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, "pod1", VECTOR_ADD, DEVICE_QUERY)
    ended(core, namespace, "pod1")
    listed = events(core, namespace, "pod1")
    assert [reason for reason, _ in listed] == ["Scheduled"] + [
        "Pulling",
        "Pulled",
        "Created",
        "Started",
    ] * 2
    assert listed[1][1] == f'Pulling image "{VECTOR_ADD}"'
    assert listed[4][1] == "Started container ctr0"
    assert listed[5][1] == f'Pulling image "{DEVICE_QUERY}"'
    assert listed[8][1] == "Started container ctr1"
    # Each image takes the topology's time (simulated seconds), the size it says if any.
    assert seconds(pulled(core, namespace, "pod1", VECTOR_ADD)["took"]) >= 10
    query = pulled(core, namespace, "pod1", DEVICE_QUERY)
    assert seconds(query["took"]) >= 5 and query["size"] == "123456789"


def test_a_pod_whose_image_is_pulling_is_bound_pending_and_creating_its_container(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, "slow", SLOW)
    wait_until(lambda: ("Pulling", f'Pulling image "{SLOW}"') in events(core, namespace, "slow"))
    pod = core.read_namespaced_pod("slow", namespace)
    assert pod.spec.node_name == "gpu-node-1" and pod.status.phase == "Pending"
    (status,) = pod.status.container_statuses
    assert status.state.waiting.reason == "ContainerCreating" and status.image_id == ""
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["PodScheduled"] == conditions["PodReadyToStartContainers"] == "True"
    assert conditions["Ready"] == "False"
    assert "Pulled" not in [reason for reason, _ in events(core, namespace, "slow")]


def test_a_node_keeps_what_it_pulled_for_the_next_pod_if_not_present(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, "first", DEVICE_QUERY)
    ended(core, namespace, "first")
    run_pod(core, namespace, "second", DEVICE_QUERY)
    ended(core, namespace, "second")
    assert [r for r, _ in events(core, namespace, "second")] == [
        "Scheduled",
        "Pulled",
        "Created",
        "Started",
    ]
    assert ("Pulled", f'Container image "{DEVICE_QUERY}" already present on machine') in events(
        core, namespace, "second"
    )


def test_pull_policy_always_pulls_again_an_image_the_node_has(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, "first", DEVICE_QUERY)
    ended(core, namespace, "first")
    run_pod(core, namespace, "again", DEVICE_QUERY, policy="Always")
    ended(core, namespace, "again")
    reasons = [r for r, _ in events(core, namespace, "again")]
    assert reasons == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    assert pulled(core, namespace, "again", DEVICE_QUERY)


def test_pull_policy_never_fails_on_an_image_the_node_does_not_have(
    core: client.CoreV1Api, namespace: str
) -> None:
    run_pod(core, namespace, "never", DEVICE_QUERY, policy="Never")
    message = f'Container image "{DEVICE_QUERY}" is not present with pull policy of Never'

    def waiting() -> client.V1ContainerStateWaiting | None:
        statuses = core.read_namespaced_pod("never", namespace).status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        return state if state and state.reason == "ErrImageNeverPull" else None

    assert wait_until(waiting, timeout=15).message == message
    seen = events(core, namespace, "never")
    assert ("ErrImageNeverPull", message) in seen and ("Failed", "Error: ErrImageNeverPull") in seen
    assert "Pulling" not in [reason for reason, _ in seen]


def test_a_node_pulls_one_image_at_a_time(core: client.CoreV1Api, namespace: str) -> None:
    run_pod(core, namespace, "first", BIG)  # 2 s of wall time
    wait_until(lambda: "Pulling" in [r for r, _ in events(core, namespace, "first")])
    run_pod(core, namespace, "second", DEVICE_QUERY)
    ended(core, namespace, "second")
    query = pulled(core, namespace, "second", DEVICE_QUERY)
    # The second pull waited for the first to end: its wait is in "including waiting" only.
    assert seconds(query["waited"]) > seconds(query["took"]) >= 5
