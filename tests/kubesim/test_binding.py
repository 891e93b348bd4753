"""pods/binding as a scheduler posts it: the Pod gets its node once."""

from __future__ import annotations

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request


def unschedulable_pod(cluster: kubesim.Handle) -> str:
    """The path of a Pod kubesim's scheduler leaves alone (its nodeSelector matches no node)."""
    namespace = create_namespace(cluster, "bind")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {
        "containers": [{"name": "ctr0", "image": "busybox"}],
        "nodeSelector": {"no-such-label": "x"},
    }
    cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    return f"/api/v1/namespaces/{namespace}/pods/p"


def binding(pod: str, node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"name": node},
    }


def test_it_binds_a_pod_to_the_node_named(kubesim_private):
    path = unschedulable_pod(kubesim_private)
    node = kubesim_private.admin("GET", "/api/v1/nodes")["items"][0]["metadata"]["name"]
    response = raw_request(kubesim_private, "POST", f"{path}/binding", binding("p", node))
    assert (response.status, response.json()["status"]) == (201, "Success")
    pod = kubesim_private.admin("GET", path)
    assert pod["spec"]["nodeName"] == node
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]


def test_it_refuses_to_bind_a_pod_twice(kubesim_private):
    path = unschedulable_pod(kubesim_private)
    node = kubesim_private.admin("GET", "/api/v1/nodes")["items"][0]["metadata"]["name"]
    assert raw_request(kubesim_private, "POST", f"{path}/binding", binding("p", node)).status == 201
    again = raw_request(kubesim_private, "POST", f"{path}/binding", binding("p", node))
    assert again.status == 409
    assert again.json()["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": '
        f'pod p is already assigned to node "{node}"'
    )
    other = raw_request(kubesim_private, "POST", f"{path}/binding", binding("q", node))
    assert other.status == 400
    assert raw_request(kubesim_private, "GET", f"{path}/binding").status == 405
