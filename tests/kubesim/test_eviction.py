"""pods/eviction as `kubectl drain` uses it: with no PodDisruptionBudgets it deletes the Pod."""

from __future__ import annotations

import kubesim
from tests.fixtures.kubesim import create_namespace, raw_request, wait_until


def running_pod(cluster: kubesim.Handle) -> str:
    """The path of a scheduled Pod in a namespace of its own."""
    namespace = create_namespace(cluster, "evict")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {"containers": [{"name": "ctr0", "image": "busybox"}]}
    cluster.admin("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    path = f"/api/v1/namespaces/{namespace}/pods/p"
    wait_until(lambda: cluster.admin("GET", path)["spec"].get("nodeName"))
    return path


def eviction(name: str, **options: object) -> dict:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    return body | ({"deleteOptions": options} if options else {})


def test_it_deletes_an_evicted_pod(kubesim_cluster):
    path = running_pod(kubesim_cluster)
    response = raw_request(
        kubesim_cluster, "POST", f"{path}/eviction", eviction("p", gracePeriodSeconds=0)
    )
    assert response.status == 201
    assert response.json()["status"] == "Success"
    assert wait_until(lambda: raw_request(kubesim_cluster, "GET", path).status == 404)


def test_it_refuses_an_eviction_naming_another_pod(kubesim_cluster):
    path = running_pod(kubesim_cluster)
    response = raw_request(kubesim_cluster, "POST", f"{path}/eviction", eviction("other"))
    assert response.status == 400
    assert response.json()["message"] == "name in URL does not match name in Eviction object"
    assert raw_request(kubesim_cluster, "GET", f"{path}/eviction").status == 405
    assert raw_request(kubesim_cluster, "GET", path).status == 200
