"""Kueue's API where the topology says the cluster runs it: its CRDs (upstream's schemas:
defaults, structural rules, CEL rules, pruning), discovery, and the visibility API's pending
workloads in StrictFIFO order."""

from __future__ import annotations

from typing import Any

from kubernetes import client

import kubesim
from tests.fixtures.kubesim import api_client, create_namespace, raw_request, wait_until
from tests.fixtures.kueue import KUEUE, condition, kueue_cluster, kueue_topology, make_queues

__all__ = ["kueue_cluster"]
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def workload(name: str, queue: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "podSets": [{"count": 1, "template": {"spec": {"containers": []}}}],
            **spec,
        },
    }


def test_a_default_cluster_does_not_serve_kueue(kubesim_cluster: kubesim.Handle) -> None:
    groups = raw_request(kubesim_cluster, "GET", "/apis").json()["groups"]
    assert not [g for g in groups if "kueue" in g["name"]]
    assert raw_request(kubesim_cluster, "GET", KUEUE).status == 404


def test_it_serves_kueues_groups_in_discovery(kueue_cluster: kubesim.Handle) -> None:
    groups = {g["name"]: g for g in raw_request(kueue_cluster, "GET", "/apis").json()["groups"]}
    assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert "visibility.kueue.x-k8s.io" in groups
    resources = {r["name"]: r for r in raw_request(kueue_cluster, "GET", KUEUE).json()["resources"]}
    assert {"workloads", "workloads/status", "localqueues", "clusterqueues"} <= set(resources)
    assert resources["workloads"]["namespaced"] and not resources["clusterqueues"]["namespaced"]
    assert "resourceflavors/status" not in resources  # upstream's CRD has no status subresource
    assert "kwl" in resources["workloads"]["shortNames"]
    visibility = raw_request(kueue_cluster, "GET", VISIBILITY).json()["resources"]
    assert "localqueues/pendingworkloads" in {r["name"] for r in visibility}


def test_it_defaults_and_prunes_as_the_crd_says(kueue_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kueue_cluster)
    body = workload("defaulted")
    body["spec"]["unknownField"] = 1
    created = kueue_cluster.admin("POST", f"{KUEUE}/namespaces/{namespace}/workloads", body)
    assert created["spec"]["active"] is True
    assert created["spec"]["podSets"][0]["name"] == "main"
    assert "unknownField" not in created["spec"]
    strict = raw_request(
        kueue_cluster,
        "POST",
        f"{KUEUE}/namespaces/{namespace}/workloads?fieldValidation=Strict",
        {**body, "metadata": {"name": "strict"}},
    )
    assert strict.status == 400
    assert 'unknown field "spec.unknownField"' in strict.json()["message"]


def test_it_refuses_what_the_schema_refuses(kueue_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kueue_cluster)
    path = f"{KUEUE}/namespaces/{namespace}/workloads"
    no_pod_sets = workload("empty")
    no_pod_sets["spec"]["podSets"] = []
    bad_count = workload("bad")
    bad_count["spec"]["podSets"][0].update({"count": 1, "minCount": 2})
    bad_name = workload("named")
    bad_name["spec"]["podSets"][0]["name"] = "Main_Set"
    for body, expected in (
        (no_pod_sets, "spec.podSets in body should have at least 1 items"),
        (bad_count, "minCount should be positive and less or equal to count"),
        (bad_name, "spec.podSets[0].name in body should match"),
    ):
        answer = raw_request(kueue_cluster, "POST", path, body)
        assert answer.status == 422, body
        assert answer.json()["reason"] == "Invalid"
        assert expected in answer.json()["message"]
    missing = raw_request(kueue_cluster, "POST", f"{KUEUE}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "q"}, "spec": {"resourceGroups": [{"coveredResources": ["gpus"],
        "flavors": [{"name": "f", "resources": [{"name": "gpus", "nominalQuota": 1},
        {"name": "cpu", "nominalQuota": 1}]}]}]},
    })  # fmt: skip
    assert missing.status == 422
    assert "flavors must have the same number of resources" in missing.json()["message"]


def test_a_local_queues_cluster_queue_is_immutable(kueue_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kueue_cluster)
    make_queues(kueue_cluster, namespace, local_queue="immutable")
    path = f"{KUEUE}/namespaces/{namespace}/localqueues/immutable"
    queue = kueue_cluster.admin("GET", path)
    queue["spec"]["clusterQueue"] = "another"
    answer = raw_request(kueue_cluster, "PUT", path, queue)
    assert answer.status == 422
    assert "field is immutable" in answer.json()["message"]


def test_status_is_written_through_its_subresource(kueue_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kueue_cluster)
    api = client.CustomObjectsApi(api_client(kueue_cluster))
    body = workload("statused")
    body["status"] = {"conditions": [condition("Admitted", True, "Admitted", "no")]}
    created = api.create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", body
    )
    assert "status" not in created or not created["status"].get("conditions")
    created["status"] = {"conditions": [condition("QuotaReserved", False, "Pending", "wait")]}
    api.replace_namespaced_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", "statused", created
    )
    read = api.get_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", "statused"
    )
    assert read["status"]["conditions"][0]["message"] == "wait"


def pending(handle: kubesim.Handle, path: str) -> list[tuple[str, int, int]]:
    items = handle.admin("GET", f"{VISIBILITY}{path}/pendingworkloads")["items"]
    return [
        (i["metadata"]["name"], i["positionInLocalQueue"], i["positionInClusterQueue"])
        for i in items
    ]


def test_the_visibility_api_orders_pending_workloads_as_strict_fifo(
    kueue_cluster: kubesim.Handle,
) -> None:
    a, b = create_namespace(kueue_cluster), create_namespace(kueue_cluster)
    make_queues(kueue_cluster, a, local_queue="lq", cluster_queue="fifo")
    make_queues(kueue_cluster, b, local_queue="lq", cluster_queue="fifo")
    for namespace, name, priority in ((a, "first", 0), (b, "second", 0), (a, "urgent", 10)):
        body = workload(name, "lq", priority=priority)
        kueue_cluster.admin("POST", f"{KUEUE}/namespaces/{namespace}/workloads", body)
    admitted = workload("admitted", "lq")
    created = kueue_cluster.admin("POST", f"{KUEUE}/namespaces/{a}/workloads", admitted)
    created["status"] = {"conditions": [condition("QuotaReserved", True, "QuotaReserved", "")]}
    kueue_cluster.admin("PUT", f"{KUEUE}/namespaces/{a}/workloads/admitted/status", created)

    in_cluster = pending(kueue_cluster, "/clusterqueues/fifo")
    assert [(name, cq) for name, _, cq in in_cluster] == [
        ("urgent", 0),
        ("first", 1),
        ("second", 2),
    ]
    assert pending(kueue_cluster, f"/namespaces/{a}/localqueues/lq") == [
        ("urgent", 0, 0),
        ("first", 1, 1),
    ]
    assert pending(kueue_cluster, f"/namespaces/{b}/localqueues/lq") == [("second", 0, 2)]
    none = f"{VISIBILITY}/namespaces/{a}/localqueues/none/pendingworkloads"
    missing = raw_request(kueue_cluster, "GET", none)
    assert missing.status == 404


def test_a_cluster_without_the_visibility_api_does_not_serve_it() -> None:
    with kubesim.start(speed=20, topology=kueue_topology(visibility=False)) as handle:
        names = {g["name"] for g in raw_request(handle, "GET", "/apis").json()["groups"]}
        assert "kueue.x-k8s.io" in names and "visibility.kueue.x-k8s.io" not in names


def test_a_jobs_workload_goes_with_the_job(kueue_cluster: kubesim.Handle) -> None:
    """The garbage collector deletes a Workload whose owner Job is deleted (Background)."""
    namespace = create_namespace(kueue_cluster)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "owner"},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                }
            },
        },
    }
    created = kueue_cluster.admin("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    owned = workload("job-owner-abcde")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "owner",
         "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    kueue_cluster.admin("POST", f"{KUEUE}/namespaces/{namespace}/workloads", owned)
    options = {"propagationPolicy": "Background"}
    kueue_cluster.admin("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/owner", options)
    path = f"{KUEUE}/namespaces/{namespace}/workloads"
    wait_until(lambda: not kueue_cluster.admin("GET", path)["items"], timeout=30)


def test_a_custom_resource_takes_no_strategic_merge_patch(kueue_cluster: kubesim.Handle) -> None:
    namespace = create_namespace(kueue_cluster)
    make_queues(kueue_cluster, namespace, local_queue="patched")
    path = f"{KUEUE}/namespaces/{namespace}/localqueues/patched"
    body = {"metadata": {"labels": {"team": "a"}}}
    refused = raw_request(
        kueue_cluster, "PATCH", path, body, content_type="application/strategic-merge-patch+json"
    )
    assert refused.status == 415
    assert refused.json()["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
    merged = raw_request(
        kueue_cluster, "PATCH", path, body, content_type="application/merge-patch+json"
    )
    assert merged.status == 200 and merged.json()["metadata"]["labels"] == {"team": "a"}
