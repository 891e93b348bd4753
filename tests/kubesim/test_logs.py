"""pods/log through the official client: container choice, tail, limits, timestamps, follow."""

from __future__ import annotations

import time

import kubernetes_validate
from kubernetes import client

from tests.fixtures.kubesim import api_client, raw_request

CLAIM_V1BETA1 = {
    "apiVersion": "resource.k8s.io/v1beta1",
    "kind": "ResourceClaim",
    "metadata": {"name": "gpu-claim"},
    "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
}


def run_seed_pod(handle, namespace: str) -> client.CoreV1Api:
    api = api_client(handle)
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    client.ResourceV1beta1Api(api).create_namespaced_resource_claim(namespace, CLAIM_V1BETA1)
    containers = [
        {
            "name": name,
            "image": f"nvcr.io/nvidia/k8s/cuda-sample:{image}",
            "resources": {"claims": [{"name": "gpu"}]},
        }
        for name, image in (("ctr0", "vectoradd-cuda12.5.0"), ("ctr1", "devicequery"))
    ]
    spec = {
        "restartPolicy": "Never",
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
        "containers": containers,
    }
    core.create_namespaced_pod(namespace, {"metadata": {"name": "pod1"}, "spec": spec})
    return core


def wait_for_phase(core: client.CoreV1Api, namespace: str, phase: str) -> None:
    deadline = time.monotonic() + 20
    while core.read_namespaced_pod("pod1", namespace).status.phase != phase:
        assert time.monotonic() < deadline, f"pod1 never reached {phase}"
        time.sleep(0.05)


def test_it_serves_container_logs_with_tail_limit_and_timestamps(kubesim_cluster, namespace_name):
    core = run_seed_pod(kubesim_cluster, namespace_name)
    wait_for_phase(core, namespace_name, "Succeeded")
    text = core.read_namespaced_pod_log("pod1", namespace_name, container="ctr0")
    assert text.rstrip().endswith("Done")
    assert (
        core.read_namespaced_pod_log("pod1", namespace_name, container="ctr0", tail_lines=1)
        == "Done\n"
    )
    assert (
        len(core.read_namespaced_pod_log("pod1", namespace_name, container="ctr0", limit_bytes=5))
        == 5
    )
    stamped = core.read_namespaced_pod_log(
        "pod1", namespace_name, container="ctr1", timestamps=True
    )
    stamp = stamped.split(" ", 1)[0]
    assert len(stamp) == len("2025-01-01T00:00:00.000000000Z")


def test_it_asks_for_a_container_name_when_a_pod_has_several(kubesim_cluster, namespace_name):
    run_seed_pod(kubesim_cluster, namespace_name)
    path = f"/api/v1/namespaces/{namespace_name}/pods/pod1/log"
    response = raw_request(kubesim_cluster, "GET", path)
    assert response.status == 400
    assert response.json()["message"] == (
        "a container name must be specified for pod pod1, choose one of: [ctr0 ctr1]"
    )


def test_it_follows_a_log_until_the_container_ends(kubesim_cluster, namespace_name):
    core = run_seed_pod(kubesim_cluster, namespace_name)
    wait_for_phase(core, namespace_name, "Running")
    stream = core.read_namespaced_pod_log(
        "pod1", namespace_name, container="ctr1", follow=True, _preload_content=False
    )
    text = b"".join(stream.stream()).decode()
    assert "Result = PASS" in text


def test_it_returns_a_running_pods_status_and_events_that_pass_the_strict_schemas(
    kubesim_cluster, namespace_name
):
    core = run_seed_pod(kubesim_cluster, namespace_name)
    wait_for_phase(core, namespace_name, "Succeeded")
    pod = raw_request(kubesim_cluster, "GET", f"/api/v1/namespaces/{namespace_name}/pods/pod1")
    kubernetes_validate.validate(pod.json(), "1.34", strict=True)
    events = raw_request(kubesim_cluster, "GET", f"/api/v1/namespaces/{namespace_name}/events")
    assert events.json()["items"]
    for event in events.json()["items"]:  # list items carry no kind/apiVersion (as upstream)
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Event", **event}, "1.34", strict=True
        )


def test_it_keeps_only_lines_since_a_time(kubesim_cluster, namespace_name):
    core = run_seed_pod(kubesim_cluster, namespace_name)
    wait_for_phase(core, namespace_name, "Succeeded")
    path = f"/api/v1/namespaces/{namespace_name}/pods/pod1/log?container=ctr0"
    everything = raw_request(kubesim_cluster, "GET", path).body
    assert everything
    assert raw_request(kubesim_cluster, "GET", path + "&sinceTime=2000-01-01T00:00:00Z").body == (
        everything
    )
    assert raw_request(kubesim_cluster, "GET", path + "&sinceTime=2999-01-01T00:00:00Z").body == b""
    assert raw_request(kubesim_cluster, "GET", path + "&sinceSeconds=3600").body == everything
    assert raw_request(kubesim_cluster, "GET", path + "&sinceTime=yesterday").status == 400
