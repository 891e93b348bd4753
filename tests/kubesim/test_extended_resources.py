"""Extended resources backed by DRA, and device taints, as kube-scheduler v1.34 has them with
DRAExtendedResource and DRADeviceTaints on.

A Pod asking `nvidia.com/gpu: 1` gets a claim the scheduler makes (gpu.nvidia.com's
`extendedResourceName`); a tainted device is allocated only to a request that tolerates the
taint; a DeviceTaintRule (resource.k8s.io/v1alpha3) taints the devices it selects.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

import kubesim
from tests.fixtures.kubesim import (
    QUIET_TOPOLOGY,
    api_client,
    create_namespace,
    raw_request,
    wait_until,
)

IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
RULES = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    """The quiet default cluster, with resource.k8s.io/v1alpha3 served (DeviceTaintRule)."""
    handle = kubesim.start(
        speed=20,
        topology=QUIET_TOPOLOGY,
        served_versions=("v1", "v1beta2", "v1beta1", "v1alpha3"),
    )
    yield handle
    handle.stop()


@pytest.fixture
def namespace(cluster: kubesim.Handle) -> Iterator[str]:
    name = create_namespace(cluster, "ext")
    yield name
    core = client.CoreV1Api(api_client(cluster))
    for pod in core.list_namespaced_pod(name).items:
        core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=0)
    for rule in cluster.admin("GET", RULES)["items"]:
        cluster.admin("DELETE", f"{RULES}/{rule['metadata']['name']}")
    wait_until(lambda: not allocated(cluster), timeout=15)


def allocated(cluster: kubesim.Handle) -> list[dict]:
    claims = cluster.admin("GET", "/apis/resource.k8s.io/v1/resourceclaims")["items"]
    return [c for c in claims if (c.get("status") or {}).get("allocation")]


def gpu_pod(name: str, gpus: int = 1) -> client.V1Pod:
    container = client.V1Container(
        name="cuda",
        image=IMAGE,
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": str(gpus)}),
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[container], restart_policy="Never"),
    )


def scheduled(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod | None:
    pod = core.read_namespaced_pod(name, namespace)
    return pod if pod.spec.node_name else None


def test_it_gives_gpu_nvidia_com_the_extended_resource_name(cluster: kubesim.Handle) -> None:
    classes = client.ResourceV1Api(api_client(cluster)).list_device_class().items
    by_name = {c.metadata.name: c.spec.extended_resource_name for c in classes}
    assert by_name["gpu.nvidia.com"] == "nvidia.com/gpu"


def test_it_makes_and_allocates_a_claim_for_a_pod_asking_nvidia_com_gpu(
    cluster: kubesim.Handle, namespace: str
) -> None:
    core = client.CoreV1Api(api_client(cluster))
    core.create_namespaced_pod(namespace, gpu_pod("trainer"))

    pod = wait_until(lambda: scheduled(core, namespace, "trainer"), timeout=15)
    status = pod.status.extended_resource_claim_status
    assert status.resource_claim_name.startswith("trainer-extended-resources-")
    assert len(status.resource_claim_name) == len("trainer-extended-resources-") + 5
    mapping = status.request_mappings[0]
    assert (mapping.container_name, mapping.resource_name, mapping.request_name) == (
        "cuda",
        "nvidia.com/gpu",
        "container-0-request-0",
    )
    claim = client.ResourceV1Api(api_client(cluster)).read_namespaced_resource_claim(
        status.resource_claim_name, namespace
    )
    assert claim.metadata.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
    owner = claim.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "Pod",
        "trainer",
        pod.metadata.uid,
        True,
        True,
    )
    assert claim.metadata.finalizers == ["resource.kubernetes.io/delete-protection"]
    (request,) = claim.spec.devices.requests
    assert request.name == "container-0-request-0"
    assert (request.exactly.device_class_name, request.exactly.count) == ("gpu.nvidia.com", 1)
    (result,) = claim.status.allocation.devices.results
    assert (result.request, result.driver, result.pool) == (
        "container-0-request-0",
        "gpu.nvidia.com",
        pod.spec.node_name,
    )
    assert [(r.resource, r.name) for r in claim.status.reserved_for] == [("pods", "trainer")]


def test_it_deletes_the_claim_with_its_pod(cluster: kubesim.Handle, namespace: str) -> None:
    core = client.CoreV1Api(api_client(cluster))
    core.create_namespaced_pod(namespace, gpu_pod("short"))
    pod = wait_until(lambda: scheduled(core, namespace, "short"), timeout=15)
    name = pod.status.extended_resource_claim_status.resource_claim_name

    core.delete_namespaced_pod("short", namespace, grace_period_seconds=0)

    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    wait_until(lambda: raw_request(cluster, "GET", path).status == 404, timeout=15)


def test_it_leaves_a_pod_asking_for_an_unbacked_extended_resource_pending(
    cluster: kubesim.Handle, namespace: str
) -> None:
    core = client.CoreV1Api(api_client(cluster))
    pod = gpu_pod("fpga")
    pod.spec.containers[0].resources.limits = {"example.com/fpga": "1"}
    core.create_namespaced_pod(namespace, pod)

    def unschedulable() -> str:
        conditions = core.read_namespaced_pod("fpga", namespace).status.conditions or []
        return next((c.message for c in conditions if c.reason == "Unschedulable"), "")

    message = wait_until(unschedulable, timeout=15)
    assert message.startswith("0/2 nodes are available: 2 Insufficient example.com/fpga.")


def slice_taint(cluster: kubesim.Handle, node: str, device: str, taint: dict | None) -> None:
    """Taint (None: untaint) one device as its driver would: an update of the node's slice."""
    slices = cluster.admin("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]
    resource_slice = next(s for s in slices if s["spec"]["nodeName"] == node)
    for entry in resource_slice["spec"]["devices"]:
        if entry["name"] == device:
            entry.pop("taints", None)
            entry.update({"taints": [taint]} if taint else {})
    name = resource_slice["metadata"]["name"]
    cluster.admin("PUT", f"/apis/resource.k8s.io/v1/resourceslices/{name}", resource_slice)


def claim_pod(namespace: str, name: str, tolerations: list[dict] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": 4}
    if tolerations:
        exactly["tolerations"] = tolerations
    return {
        "claim": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        },
        "pod": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "gpu-node-1"},
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "containers": [
                    {"name": "cuda", "image": IMAGE, "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        },
    }


def submit(cluster: kubesim.Handle, namespace: str, objects: dict[str, Any]) -> None:
    claims = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    cluster.admin("POST", claims, objects["claim"])
    cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", objects["pod"])


def pod_message(cluster: kubesim.Handle, namespace: str, name: str) -> str:
    pod = cluster.admin("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conditions if c.get("status") == "False"), "")


def test_it_does_not_allocate_a_tainted_device(cluster: kubesim.Handle, namespace: str) -> None:
    taint = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    slice_taint(cluster, "gpu-node-1", "gpu-0", taint)
    try:
        submit(cluster, namespace, claim_pod(namespace, "all-four"))
        message = wait_until(lambda: pod_message(cluster, namespace, "all-four"), timeout=15)
        assert "cannot allocate all claims" in message
    finally:
        slice_taint(cluster, "gpu-node-1", "gpu-0", None)


def test_it_stamps_a_slice_taint_with_the_time_added(cluster: kubesim.Handle) -> None:
    taint = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}
    slice_taint(cluster, "gpu-node-2", "gpu-1", taint)
    try:
        slices = client.ResourceV1Api(api_client(cluster)).list_resource_slice().items
        node_slice = next(s for s in slices if s.spec.node_name == "gpu-node-2")
        device = next(d for d in node_slice.spec.devices if d.name == "gpu-1")
        (stored,) = device.taints
        assert (stored.key, stored.value, stored.effect) == (
            "gpu.nvidia.com/xid",
            "79",
            "NoExecute",
        )
        assert stored.time_added is not None
    finally:
        slice_taint(cluster, "gpu-node-2", "gpu-1", None)


def test_it_allocates_a_tainted_device_to_a_request_that_tolerates_it(
    cluster: kubesim.Handle, namespace: str
) -> None:
    taint = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    slice_taint(cluster, "gpu-node-1", "gpu-0", taint)
    tolerations = [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]
    try:
        submit(cluster, namespace, claim_pod(namespace, "tolerant", tolerations))
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/tolerant"
        claim = wait_until(
            lambda: (cluster.admin("GET", path).get("status") or {}).get("allocation"), timeout=15
        )
        assert "gpu-0" in {result["device"] for result in claim["devices"]["results"]}
    finally:
        slice_taint(cluster, "gpu-node-1", "gpu-0", None)


def test_a_device_taint_rule_taints_the_devices_it_selects(
    cluster: kubesim.Handle, namespace: str
) -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "node-1-gpu-2"},
        "spec": {
            "deviceSelector": {
                "deviceClassName": "gpu.nvidia.com",
                "driver": "gpu.nvidia.com",
                "pool": "gpu-node-1",
                "device": "gpu-2",
            },
            "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
        },
    }
    created = raw_request(cluster, "POST", RULES, rule)
    assert created.status == 201, created.body
    assert created.json()["spec"]["taint"]["timeAdded"]

    submit(cluster, namespace, claim_pod(namespace, "four-again"))

    message = wait_until(lambda: pod_message(cluster, namespace, "four-again"), timeout=15)
    assert "cannot allocate all claims" in message


def test_it_serves_device_taint_rules_only_in_v1alpha3(cluster: kubesim.Handle) -> None:
    listed = raw_request(cluster, "GET", "/apis/resource.k8s.io/v1alpha3").json()
    assert [r["name"] for r in listed["resources"]] == ["devicetaintrules"]
    v1 = raw_request(cluster, "GET", "/apis/resource.k8s.io/v1").json()
    assert "devicetaintrules" not in [r["name"] for r in v1["resources"]]
    assert raw_request(cluster, "GET", "/apis/resource.k8s.io/v1/devicetaintrules").status == 404


def test_a_default_cluster_does_not_serve_v1alpha3(kubesim_cluster: kubesim.Handle) -> None:
    group = raw_request(kubesim_cluster, "GET", "/apis/resource.k8s.io").json()
    assert "resource.k8s.io/v1alpha3" not in [v["groupVersion"] for v in group["versions"]]


def test_it_refuses_a_taint_without_an_effect(cluster: kubesim.Handle) -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "no-effect"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com"}, "taint": {"key": "a.b/c"}},
    }
    response = raw_request(cluster, "POST", RULES, rule)
    assert response.status == 422
    assert "spec.taint.effect: Required value" in response.json()["message"]


def test_it_refuses_a_device_class_with_a_native_extended_resource_name(
    cluster: kubesim.Handle,
) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "bad.example.com"},
        "spec": {"extendedResourceName": "cpu"},
    }
    response = raw_request(cluster, "POST", "/apis/resource.k8s.io/v1/deviceclasses", body)
    assert response.status == 422
    assert (
        'spec.extendedResourceName: Invalid value: "cpu": must be a valid extended resource'
        in (response.json()["message"])
    )
