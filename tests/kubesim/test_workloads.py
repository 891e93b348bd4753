"""Other teams' workloads: the default cluster starts with a claim made outside any portal
holding GPUs, allocated and reserved by the scheduler as any claim is."""

from __future__ import annotations

import pytest

import kubesim
from kubesim.cluster.topology import TopologyError, from_dict, load
from tests.fixtures.kubesim import QUIET_TOPOLOGY, SHARED_TOPOLOGY, wait_until

CLAIM = "/apis/resource.k8s.io/v1/namespaces/vision-research/resourceclaims/trainer"
POD = "/api/v1/namespaces/vision-research/pods/trainer"


@pytest.fixture(scope="module")
def shared() -> kubesim.Handle:
    handle = kubesim.start(speed=20, topology=SHARED_TOPOLOGY)
    yield handle
    handle.stop()


def test_the_default_topology_has_another_teams_workload() -> None:
    (workload,) = load().workloads

    assert (workload.namespace, workload.name, workload.node, workload.gpus) == (
        "vision-research",
        "trainer",
        "gpu-node-1",
        2,
    )


def test_it_starts_with_the_claim_allocated_by_the_scheduler(shared: kubesim.Handle) -> None:
    claim = shared.admin("GET", CLAIM)
    pod = shared.admin("GET", POD)

    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [
        ("gpu-node-1", "gpu-0"),
        ("gpu-node-1", "gpu-1"),
    ]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}
    ]
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    fields = claim["metadata"]["managedFields"]
    managers = {(m["manager"], m.get("subresource", "")) for m in fields}
    assert ("kubectl-create", "") in managers and ("kube-scheduler", "status") in managers
    assert "labels" not in claim["metadata"]  # nothing a portal would recognise as its own


def test_its_pod_runs_until_deleted(shared: kubesim.Handle) -> None:
    def running() -> bool:
        pod = shared.admin("GET", POD)
        states = pod["status"].get("containerStatuses") or [{}]
        return pod["status"]["phase"] == "Running" and "running" in states[0].get("state", {})

    wait_until(running, timeout=10)
    pod = shared.admin("GET", POD)
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_a_deleted_workload_frees_its_devices() -> None:
    with kubesim.start(speed=50, topology=SHARED_TOPOLOGY) as handle:
        handle.admin("DELETE", POD)

        # `sleep infinity` as PID 1 ignores SIGTERM: killed when the 30 s grace runs out.
        wait_until(lambda: not handle.admin("GET", CLAIM).get("status"), timeout=10)


def test_a_quiet_topology_has_no_workloads() -> None:
    with kubesim.start(speed=20, topology=QUIET_TOPOLOGY) as handle:
        namespaces = handle.admin("GET", "/api/v1/namespaces")["items"]
        claims = handle.admin("GET", "/apis/resource.k8s.io/v1/resourceclaims")["items"]

    assert "vision-research" not in {ns["metadata"]["name"] for ns in namespaces}
    assert claims == []


def test_it_makes_the_claim_in_the_version_the_cluster_serves() -> None:
    with kubesim.start(
        speed=20, topology=SHARED_TOPOLOGY, served_versions=("v1beta1",), k8s_version="1.33.5"
    ) as handle:
        claim = handle.admin("GET", CLAIM.replace("/v1/", "/v1beta1/"))

    assert claim["spec"]["devices"]["requests"][0]["count"] == 2
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2


@pytest.mark.parametrize(
    "workloads, problem",
    [
        ({"name": "x"}, "needs a `namespace` and a `name`"),
        ({"namespace": "a", "name": "x", "gpus": 0}, "`gpus` must be a whole number"),
        ({"namespace": "a", "name": "x", "node": "nosuch"}, "no node 'nosuch'"),
        ({"namespace": "a", "name": "x", "color": "red"}, "a workload has the keys"),
    ],
)
def test_it_refuses_a_workload_it_cannot_make(workloads: dict, problem: str) -> None:
    with pytest.raises(TopologyError, match=problem):
        from_dict({"nodes": [{"name": "n1"}], "workloads": [workloads]})
