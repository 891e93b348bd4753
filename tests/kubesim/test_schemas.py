"""Objects kubesim returns validate against the upstream strict schemas of their release."""

import time

import kubernetes_validate
import pytest

import kubesim
from tests.fixtures.kubesim import create_namespace

CLAIM_REQUEST_V1 = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
CLAIM_REQUEST_V1BETA1 = {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}


def wait_for_allocation(cluster: kubesim.Handle, path: str) -> dict:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        claim = cluster.admin("GET", path)
        if claim.get("status", {}).get("reservedFor"):
            return claim
        time.sleep(0.02)
    raise AssertionError("the claim was never allocated")


def served_objects(cluster: kubesim.Handle, version: str, request: dict) -> list[dict]:
    """A held claim, its template, the slices and classes, the pod and its events, as served."""
    namespace = create_namespace(cluster, "schema")
    group = f"/apis/resource.k8s.io/{version}"
    claim_spec = {"devices": {"requests": [request]}}
    cluster.admin(
        "POST",
        f"{group}/namespaces/{namespace}/resourceclaims",
        {"metadata": {"name": "held"}, "spec": claim_spec},
    )
    template = {
        "metadata": {"name": "tpl"},
        "spec": {"metadata": {"labels": {"a": "b"}}, "spec": claim_spec},
    }
    cluster.admin("POST", f"{group}/namespaces/{namespace}/resourceclaimtemplates", template)
    container = {
        "name": "ctr0",
        "image": "nvcr.io/nvidia/k8s/cuda-sample:devicequery",
        "resources": {"claims": [{"name": "gpu"}]},
    }
    spec = {
        "restartPolicy": "Always",
        "containers": [container],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "held"}],
    }
    cluster.admin(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        {"metadata": {"name": "holder"}, "spec": spec},
    )
    try:
        claim = wait_for_allocation(cluster, f"{group}/namespaces/{namespace}/resourceclaims/held")
        found = [
            claim,
            cluster.admin("GET", f"{group}/namespaces/{namespace}/resourceclaimtemplates/tpl"),
        ]
        for plural, kind in (("resourceslices", "ResourceSlice"), ("deviceclasses", "DeviceClass")):
            items = cluster.admin("GET", f"{group}/{plural}")["items"]
            found += [
                {"apiVersion": f"resource.k8s.io/{version}", "kind": kind, **item} for item in items
            ]
        found.append(cluster.admin("GET", f"/api/v1/namespaces/{namespace}/pods/holder"))
        events = cluster.admin("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
        found += [{"apiVersion": "v1", "kind": "Event", **event} for event in events]
        found += [
            {"apiVersion": "v1", "kind": "Node", **node}
            for node in cluster.admin("GET", "/api/v1/nodes")["items"]
        ]
        return found
    finally:
        cluster.admin("DELETE", f"/api/v1/namespaces/{namespace}/pods/holder")


def assert_valid(objects: list[dict], release: str, core_release: str) -> None:
    for obj in objects:
        target = release if obj["apiVersion"].startswith("resource.k8s.io") else core_release
        try:
            kubernetes_validate.validate(obj, target, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {path}: {error.message}")


def test_it_serves_v1_objects_that_validate_against_1_34(kubesim_cluster: kubesim.Handle) -> None:
    objects = served_objects(kubesim_cluster, "v1", CLAIM_REQUEST_V1)
    assert {o["kind"] for o in objects} >= {
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
        "DeviceClass",
        "Pod",
        "Event",
        "Node",
    }
    # A default 1.34 scheduler writes no allocationTimestamp (recording 01-seed-claim-versions).
    assert "allocationTimestamp" not in objects[0]["status"]["allocation"]
    assert_valid(objects, "1.34", "1.34")


def test_it_serves_v1beta2_of_a_1_34_cluster_without_the_allocation_timestamp(
    kubesim_cluster: kubesim.Handle,
) -> None:
    objects = served_objects(kubesim_cluster, "v1beta2", CLAIM_REQUEST_V1)
    assert "allocationTimestamp" not in objects[0]["status"]["allocation"]
    assert_valid(objects, "1.34", "1.34")


def test_it_serves_v1beta1_objects_that_validate_against_1_33(
    kubesim_v1beta1_cluster: kubesim.Handle,
) -> None:
    objects = served_objects(kubesim_v1beta1_cluster, "v1beta1", CLAIM_REQUEST_V1BETA1)
    assert objects[0]["status"]["allocation"]["devices"]["results"][0]["driver"] == "gpu.nvidia.com"
    assert_valid(objects, "1.33", "1.33")


def test_it_never_writes_the_allocation_timestamp_on_a_1_33_cluster(
    kubesim_v1beta1_cluster: kubesim.Handle,
) -> None:
    store = kubesim_v1beta1_cluster.store
    since = store.resource_version
    served = served_objects(kubesim_v1beta1_cluster, "v1beta1", CLAIM_REQUEST_V1BETA1)[0]
    assert "allocationTimestamp" not in served["status"]["allocation"]
    stored = [
        event.obj["status"]["allocation"]
        for event in store.events_since(since)
        if event.obj["kind"] == "ResourceClaim" and event.obj.get("status", {}).get("allocation")
    ]
    assert stored and all("allocationTimestamp" not in allocation for allocation in stored)


@pytest.mark.parametrize("k8s_version", ["1.33.5", "1.34.1"])
def test_its_nodes_report_the_served_kubernetes_version(k8s_version: str) -> None:
    with kubesim.start(k8s_version=k8s_version) as handle:
        nodes = handle.admin("GET", "/api/v1/nodes")["items"]
    assert {node["status"]["nodeInfo"]["kubeletVersion"] for node in nodes} == {f"v{k8s_version}"}
