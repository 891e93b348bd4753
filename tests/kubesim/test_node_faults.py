"""A node the API server cannot reach, through the official client: log reads fail as a real
kube-apiserver's do (500, a plain Go error: no address, or the kubelet dial refused), and a
deleted Pod stays Terminating, holding its claim, until the node's kubelet is back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fixtures.kubesim import api_client, create_namespace, wait_until

SAMPLE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


def claim_body(name: str) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


def pod_body(name: str, claim: str = "", node: str = "", restart: str = "Never") -> dict:
    container: dict = {"name": "ctr0", "image": SAMPLE}
    spec: dict = {"containers": [container], "restartPolicy": restart}
    if claim:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def started(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod | None:
    pod = core.read_namespaced_pod(name, namespace)
    statuses = pod.status.container_statuses or []
    return pod if statuses and (statuses[0].state.running or statuses[0].state.terminated) else None


def log_error(core: client.CoreV1Api, namespace: str, name: str, **options) -> ApiException:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log(name, namespace, container="ctr0", **options)
    return caught.value


def test_a_log_on_a_node_without_addresses_is_500_as_a_real_api_server_says(kubesim_private):
    core = client.CoreV1Api(api_client(kubesim_private))
    namespace = create_namespace(kubesim_private)
    core.create_node({"metadata": {"name": "bare-node"}})
    core.create_namespaced_pod(namespace, pod_body("on-bare", node="bare-node"))

    error = log_error(core, namespace, "on-bare")

    assert error.status == 500
    body = json.loads(error.body)
    assert body["message"] == "no preferred addresses found; known addresses: []"
    assert "reason" not in body


def test_a_log_behind_a_stopped_kubelet_fails_as_the_api_servers_dial(kubesim_private):
    core = client.CoreV1Api(api_client(kubesim_private))
    namespace = create_namespace(kubesim_private)
    client.ResourceV1Api(api_client(kubesim_private)).create_namespaced_resource_claim(
        namespace, claim_body("gpu")
    )
    core.create_namespaced_pod(namespace, pod_body("p", claim="gpu"))
    pod = wait_until(lambda: started(core, namespace, "p"), timeout=30)
    node = core.read_node(pod.spec.node_name)
    ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    kubesim_private.admin(
        "POST", "/_kubesim/faults", {"node": node.metadata.name, "kubelet": "down"}
    )

    error = log_error(core, namespace, "p", timestamps=True, tail_lines=5)

    assert error.status == 500
    url = f"https://{node.metadata.name}:10250/containerLogs/{namespace}/p/ctr0"
    assert json.loads(error.body)["message"] == (
        f'Get "{url}?tailLines=5&timestamps=true": dial tcp {ip}:10250: connect: connection refused'
    )
    kubesim_private.admin("DELETE", "/_kubesim/faults")
    assert "Test PASSED" in core.read_namespaced_pod_log("p", namespace, container="ctr0")


def test_a_deleted_pod_stays_terminating_while_its_kubelet_is_unreachable(kubesim_private):
    api = api_client(kubesim_private)
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    namespace = create_namespace(kubesim_private)
    resource.create_namespaced_resource_claim(namespace, claim_body("gpu"))
    core.create_namespaced_pod(namespace, pod_body("p", claim="gpu", restart="Always"))
    pod = wait_until(lambda: started(core, namespace, "p"), timeout=30)
    uid = pod.metadata.uid
    fault = {"node": pod.spec.node_name, "kubelet": "unreachable"}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)

    core.delete_namespaced_pod("p", namespace, grace_period_seconds=1)
    deleting = core.read_namespaced_pod("p", namespace)
    due = deleting.metadata.deletion_timestamp
    assert due is not None and deleting.metadata.deletion_grace_period_seconds == 1
    # Well past its grace period (the kubelet's is 1 s / speed 50), nobody has confirmed the
    # deletion: still there, still holding its claim.
    wait_until(lambda: datetime.now(UTC) > due + timedelta(seconds=2), timeout=10, interval=0.2)
    assert core.read_namespaced_pod("p", namespace).metadata.uid == uid
    reserved = resource.read_namespaced_resource_claim("gpu", namespace).status.reserved_for
    assert [entry.uid for entry in reserved or []] == [uid]

    kubesim_private.admin("DELETE", "/_kubesim/faults")

    wait_until(lambda: not core.list_namespaced_pod(namespace).items, timeout=30)
    claim = wait_until(
        lambda: (
            (c := resource.read_namespaced_resource_claim("gpu", namespace))
            and not c.status.reserved_for
            and c
        ),
        timeout=30,
    )
    assert claim.status.allocation is None


def test_a_forced_delete_removes_a_pod_whose_kubelet_is_down(kubesim_private):
    api = api_client(kubesim_private)
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    namespace = create_namespace(kubesim_private)
    resource.create_namespaced_resource_claim(namespace, claim_body("gpu"))
    core.create_namespaced_pod(namespace, pod_body("p", claim="gpu", restart="Always"))
    pod = wait_until(lambda: started(core, namespace, "p"), timeout=30)
    kubesim_private.admin(
        "POST", "/_kubesim/faults", {"node": pod.spec.node_name, "kubelet": "down"}
    )

    core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)

    assert not core.list_namespaced_pod(namespace).items
    wait_until(
        lambda: not resource.read_namespaced_resource_claim("gpu", namespace).status.reserved_for,
        timeout=30,
    )


def test_a_node_fault_needs_a_node_and_a_kubelet_mode(kubesim_private):
    with pytest.raises(Exception) as caught:
        kubesim_private.admin("POST", "/_kubesim/faults", {"node": "gpu-node-1", "kubelet": "off"})
    assert getattr(caught.value, "code", None) == 400
