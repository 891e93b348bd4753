"""Allocation, binding and deallocation as kube-scheduler and the claim controller do them.

These tests own a kubesim_module of their own, so they can fill every GPU without disturbing others.
"""

import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request, wait_until

FIT_ERROR = (
    "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


@pytest.fixture
def namespace(kubesim_module: kubesim.Handle) -> Iterator[str]:
    name = create_namespace(kubesim_module, "sched")
    yield name
    for pod in kubesim_module.admin("GET", f"/api/v1/namespaces/{name}/pods")["items"]:
        kubesim_module.admin("DELETE", f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}")
    wait_until(lambda: not claims_in_use(kubesim_module))


def claims_in_use(cluster: kubesim.Handle) -> list[dict]:
    claims = cluster.admin("GET", "/apis/resource.k8s.io/v1/resourceclaims")["items"]
    return [c for c in claims if (c.get("status") or {}).get("allocation")]


def cel(expression: str) -> list[dict]:
    return [{"cel": {"expression": expression}}]


def create_claim(cluster: kubesim.Handle, namespace: str, name: str, **exactly: Any) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}
    body = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    return cluster.admin(
        "POST", path, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **body}
    )


def create_pod(
    cluster: kubesim.Handle,
    namespace: str,
    name: str,
    claim: str | None = None,
    *,
    policy: str = "Always",
    template: str | None = None,
) -> dict:
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    container = {"name": "ctr0", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"}
    container["resources"] = {"claims": [{"name": "gpu"}]}
    spec = {
        "restartPolicy": policy,
        "containers": [container],
        "resourceClaims": [{"name": "gpu", **source}],
    }
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)


def get_claim(cluster: kubesim.Handle, namespace: str, name: str) -> dict:
    return cluster.admin(
        "GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    )


def claim_gone(cluster: kubesim.Handle, namespace: str, name: str) -> bool:
    try:
        get_claim(cluster, namespace, name)
    except urllib.error.HTTPError as error:
        return error.code == 404
    return False


def get_pod(cluster: kubesim.Handle, namespace: str, name: str) -> dict:
    return cluster.admin("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")


def scheduled_condition(pod: dict) -> dict | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return condition
    return None


def bound_node(cluster: kubesim.Handle, namespace: str, name: str) -> str:
    return wait_until(lambda: get_pod(cluster, namespace, name)["spec"].get("nodeName"))


def test_it_leaves_a_claim_unallocated_until_a_pod_uses_it(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "idle")
    time.sleep(0.3)
    claim = get_claim(kubesim_module, namespace, "idle")
    assert claim.get("status", {}) == {}
    assert "finalizers" not in claim["metadata"]


def test_it_allocates_reserves_and_binds_when_a_pod_is_scheduled(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "gpu-claim")
    pod = create_pod(kubesim_module, namespace, "pod1", "gpu-claim")
    node = bound_node(kubesim_module, namespace, "pod1")
    claim = get_claim(kubesim_module, namespace, "gpu-claim")
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["request"] == "gpu" and result["driver"] == "gpu.nvidia.com"
    assert result["pool"] == node and result["device"].startswith("gpu-")
    assert claim["status"]["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    assert "allocationTimestamp" not in claim["status"]["allocation"]  # alpha-gated in 1.34
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "pod1", "uid": pod["metadata"]["uid"]}
    ]
    assert scheduled_condition(get_pod(kubesim_module, namespace, "pod1"))["status"] == "True"


def test_it_puts_pods_sharing_a_claim_on_its_node(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(
        kubesim_module,
        namespace,
        "shared",
        selectors=[
            {
                "cel": {
                    "expression": "device.attributes['gpu.nvidia.com'].productName.contains('A100')"
                }
            }
        ],
    )
    first = create_pod(kubesim_module, namespace, "first", "shared")
    second = create_pod(kubesim_module, namespace, "second", "shared")
    assert (
        bound_node(kubesim_module, namespace, "first")
        == bound_node(kubesim_module, namespace, "second")
        == "gpu-node-2"
    )
    claim = get_claim(kubesim_module, namespace, "shared")
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    assert {r["uid"] for r in claim["status"]["reservedFor"]} == {
        first["metadata"]["uid"],
        second["metadata"]["uid"],
    }


def test_it_deallocates_when_the_last_consumer_finishes(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "once")
    create_pod(kubesim_module, namespace, "once", "once", policy="Never")
    wait_until(lambda: get_pod(kubesim_module, namespace, "once")["status"]["phase"] == "Succeeded")
    claim = wait_until(
        lambda: (c := get_claim(kubesim_module, namespace, "once")).get("status") == {} and c
    )
    assert "finalizers" not in claim["metadata"]


def test_it_keeps_a_ninth_gpu_pending_until_one_frees_up(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    for index in range(9):
        create_claim(kubesim_module, namespace, f"claim-{index}")
        create_pod(kubesim_module, namespace, f"pod-{index}", f"claim-{index}")
    for index in range(8):
        bound_node(kubesim_module, namespace, f"pod-{index}")
    condition = wait_until(lambda: scheduled_condition(get_pod(kubesim_module, namespace, "pod-8")))
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"] == FIT_ERROR
    assert get_pod(kubesim_module, namespace, "pod-8")["status"]["phase"] == "Pending"
    events = kubesim_module.admin("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    failed = [e for e in events if e["reason"] == "FailedScheduling"]
    assert failed and failed[0]["type"] == "Warning" and failed[0]["message"] == FIT_ERROR
    assert failed[0]["involvedObject"]["name"] == "pod-8"

    kubesim_module.admin("DELETE", f"/api/v1/namespaces/{namespace}/pods/pod-3")
    bound_node(kubesim_module, namespace, "pod-8")
    devices = [
        tuple(r.values())
        for c in claims_in_use(kubesim_module)
        for r in c["status"]["allocation"]["devices"]["results"]
    ]
    assert len(devices) == len(set(devices)) == 8


def test_it_says_when_a_device_class_does_not_exist(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    kubesim_module.admin(
        "POST", path, {"metadata": {"name": "nope"}, "spec": {"devices": {"requests": [request]}}}
    )
    create_pod(kubesim_module, namespace, "nope", "nope")
    condition = wait_until(lambda: scheduled_condition(get_pod(kubesim_module, namespace, "nope")))
    assert condition["message"].startswith(
        "0/2 nodes are available: request gpu: device class gpu.example.com does not exist."
    )


def test_it_keeps_a_pod_pending_when_no_device_matches(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    nothing = cel("device.attributes['gpu.nvidia.com'].productName == 'NONEXISTENT-GPU-XYZ'")
    create_claim(kubesim_module, namespace, "nomatch", selectors=nothing)
    create_pod(kubesim_module, namespace, "nomatch", "nomatch")
    condition = wait_until(
        lambda: scheduled_condition(get_pod(kubesim_module, namespace, "nomatch"))
    )
    assert condition["message"] == FIT_ERROR
    assert get_claim(kubesim_module, namespace, "nomatch").get("status", {}) == {}


def test_it_allocates_by_memory_capacity(kubesim_module: kubesim.Handle, namespace: str) -> None:
    big = cel("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0")
    create_claim(kubesim_module, namespace, "big", selectors=big, count=2)
    create_pod(kubesim_module, namespace, "big", "big")
    assert bound_node(kubesim_module, namespace, "big") == "gpu-node-1"
    assert (
        len(
            get_claim(kubesim_module, namespace, "big")["status"]["allocation"]["devices"][
                "results"
            ]
        )
        == 2
    )


def test_it_waits_for_a_claim_that_does_not_exist_yet(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_pod(kubesim_module, namespace, "early", "later")
    time.sleep(0.3)
    pod = get_pod(kubesim_module, namespace, "early")
    assert not pod["spec"].get("nodeName") and scheduled_condition(pod) is None
    create_claim(kubesim_module, namespace, "later")
    bound_node(kubesim_module, namespace, "early")


def test_it_creates_and_removes_claims_from_templates(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    template = {
        "metadata": {"name": "single-gpu"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    kubesim_module.admin(
        "POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", template
    )
    pod = create_pod(kubesim_module, namespace, "templated", template="single-gpu", policy="Never")
    bound_node(kubesim_module, namespace, "templated")
    (status,) = get_pod(kubesim_module, namespace, "templated")["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("templated-gpu-")
    claim = get_claim(kubesim_module, namespace, status["resourceClaimName"])
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    wait_until(
        lambda: get_pod(kubesim_module, namespace, "templated")["status"]["phase"] == "Succeeded"
    )
    wait_until(lambda: claim_gone(kubesim_module, namespace, status["resourceClaimName"]))


def test_it_keeps_a_deleted_claim_until_its_pod_is_done(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    create_claim(kubesim_module, namespace, "doomed")
    create_pod(kubesim_module, namespace, "holder", "doomed")
    bound_node(kubesim_module, namespace, "holder")
    kubesim_module.admin(
        "DELETE", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/doomed"
    )
    assert get_claim(kubesim_module, namespace, "doomed")["metadata"]["deletionTimestamp"]
    create_pod(kubesim_module, namespace, "latecomer", "doomed")
    condition = wait_until(
        lambda: scheduled_condition(get_pod(kubesim_module, namespace, "latecomer"))
    )
    assert condition["message"].startswith(
        '0/2 nodes are available: resourceclaim "doomed" is being deleted.'
    )
    kubesim_module.admin("DELETE", f"/api/v1/namespaces/{namespace}/pods/holder")
    wait_until(lambda: claim_gone(kubesim_module, namespace, "doomed"))


def test_it_keeps_a_pod_off_nodes_its_node_selector_does_not_match(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    container = {"name": "c", "image": "busybox"}
    spec = {"containers": [container], "nodeSelector": {"no-such-label": "x"}}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere"}, "spec": spec}
    kubesim_module.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    condition = wait_until(
        lambda: scheduled_condition(get_pod(kubesim_module, namespace, "nowhere"))
    )
    assert (condition["status"], condition["observedGeneration"]) == ("False", 1)
    assert condition["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
        "no new claims to deallocate, preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling."
    )
    assert "nodeName" not in get_pod(kubesim_module, namespace, "nowhere")["spec"]


def test_it_places_a_pod_by_its_required_node_affinity(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    nodes = [n["metadata"]["name"] for n in kubesim_module.admin("GET", "/api/v1/nodes")["items"]]
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": nodes[-1:]}]}
    by_label = {"matchExpressions": [{"key": "no-such-label", "operator": "Exists"}]}
    for name, term in (("named", by_name), ("labelled", by_label)):
        affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        spec = {
            "containers": [{"name": "c", "image": "busybox"}],
            "affinity": {"nodeAffinity": affinity},
        }
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
        kubesim_module.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert bound_node(kubesim_module, namespace, "named") == nodes[-1]
    condition = wait_until(
        lambda: scheduled_condition(get_pod(kubesim_module, namespace, "labelled"))
    )
    assert condition["status"] == "False"
    assert f"{len(nodes)} node(s) didn't match Pod's node affinity/selector" in condition["message"]


def test_it_keeps_pods_off_cordoned_nodes_unless_they_tolerate_it(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    nodes = [n["metadata"]["name"] for n in kubesim_module.admin("GET", "/api/v1/nodes")["items"]]

    def cordon(unschedulable: bool) -> None:
        patch = {"spec": {"unschedulable": unschedulable or None}}
        for node in nodes:
            merge = "application/merge-patch+json"
            answer = raw_request(
                kubesim_module, "PATCH", f"/api/v1/nodes/{node}", patch, content_type=merge
            )
            assert answer.status == 200, answer.body

    cordon(True)
    try:
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cordoned"}, "spec": spec}
        kubesim_module.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)
        condition = wait_until(
            lambda: scheduled_condition(get_pod(kubesim_module, namespace, "cordoned"))
        )
        assert condition["message"] == (
            f"0/{len(nodes)} nodes are available: {len(nodes)} node(s) were unschedulable. "
            f"no new claims to deallocate, preemption: 0/{len(nodes)} nodes are available: "
            f"{len(nodes)} Preemption is not helpful for scheduling."
        )
        tolerating = {
            **spec,
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
        }
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "daemon"},
            "spec": tolerating,
        }
        kubesim_module.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)
        assert bound_node(kubesim_module, namespace, "daemon") in nodes
    finally:
        cordon(False)
    assert bound_node(kubesim_module, namespace, "cordoned") in nodes  # uncordoned: it goes


def test_it_keeps_pods_off_nodes_with_taints_they_do_not_tolerate(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    """As GPU node pools often are (nvidia.com/gpu=present:NoSchedule): only a Pod with a
    matching toleration goes there; a PreferNoSchedule taint only scores."""
    nodes = [n["metadata"]["name"] for n in kubesim_module.admin("GET", "/api/v1/nodes")["items"]]

    def taint(taints: list[dict] | None) -> None:
        for node in nodes:
            answer = raw_request(
                kubesim_module,
                "PATCH",
                f"/api/v1/nodes/{node}",
                {"spec": {"taints": taints}},
                content_type="application/merge-patch+json",
            )
            assert answer.status == 200, answer.body

    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}

    def pod(name: str, tolerations: list[dict]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {**spec, "tolerations": tolerations},
        }
        kubesim_module.admin("POST", f"/api/v1/namespaces/{namespace}/pods", body)

    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    taint([gpu, {"key": "team", "value": "ml", "effect": "PreferNoSchedule"}])
    try:
        pod("plain", [])
        pod("other-value", [{"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}])
        pod("tolerating", [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
        pod("equal", [{"key": "nvidia.com/gpu", "value": "present"}])
        assert bound_node(kubesim_module, namespace, "tolerating") in nodes
        assert bound_node(kubesim_module, namespace, "equal") in nodes
        for name in ("plain", "other-value"):
            condition = wait_until(
                lambda name=name: scheduled_condition(get_pod(kubesim_module, namespace, name))
            )
            assert condition["message"] == (
                f"0/{len(nodes)} nodes are available: {len(nodes)} node(s) had untolerated "
                f"taint(s). no new claims to deallocate, preemption: 0/{len(nodes)} nodes are "
                f"available: {len(nodes)} Preemption is not helpful for scheduling."
            )
    finally:
        taint(None)
    assert bound_node(kubesim_module, namespace, "plain") in nodes  # untainted: it goes
