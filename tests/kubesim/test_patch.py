"""Patch formats: JSON merge, strategic merge as kubectl sends it, JSON patch; 415 otherwise."""

from __future__ import annotations

import contextlib
import threading

import pytest
from kubernetes import client

from kubesim.base.errors import ApiError
from kubesim.registry.kinds import kind_for
from kubesim.registry.patch import json_patch, merge_patch, strategic_merge
from tests.fixtures.kubesim import api_client, raw_request


def pod(*containers: dict) -> dict:
    return {"spec": {"containers": list(containers)}}


def test_it_merges_objects_and_deletes_nulls_in_a_merge_patch():
    target = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": [1, 2]}}
    patched = merge_patch(
        target, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"x": [3]}}
    )
    assert patched == {"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"x": [3]}}


def test_it_merges_containers_by_name_in_a_strategic_merge_patch():
    target = pod({"name": "a", "image": "one"}, {"name": "b", "image": "two"})
    patched = strategic_merge(target, pod({"name": "b", "image": "three"}))
    assert patched == pod({"name": "a", "image": "one"}, {"name": "b", "image": "three"})


def test_it_deletes_a_list_item_with_the_patch_directive():
    target = pod({"name": "a", "image": "one"}, {"name": "b", "image": "two"})
    patched = strategic_merge(target, pod({"name": "a", "$patch": "delete"}))
    assert patched == pod({"name": "b", "image": "two"})


def test_it_removes_reserved_for_entries_by_uid():
    target = {"status": {"reservedFor": [{"uid": "1", "name": "p1"}, {"uid": "2", "name": "p2"}]}}
    patched = strategic_merge(
        target, {"status": {"reservedFor": [{"$patch": "delete", "uid": "1"}]}}
    )
    assert patched == {"status": {"reservedFor": [{"uid": "2", "name": "p2"}]}}


def test_it_merges_conditions_by_type_and_claims_by_name():
    target = {
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "a"}]},
    }
    patch = {
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        "spec": {"resourceClaims": [{"name": "gpu2", "resourceClaimName": "b"}]},
    }
    patched = strategic_merge(target, patch)
    assert patched["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert [claim["name"] for claim in patched["spec"]["resourceClaims"]] == ["gpu", "gpu2"]


def test_it_orders_a_list_as_set_element_order_asks():
    target = pod({"name": "a"}, {"name": "b"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}
    assert strategic_merge(target, patch) == pod({"name": "b"}, {"name": "a"})


def test_it_replaces_lists_without_a_merge_key():
    target = {"spec": {"containers": [{"name": "a", "args": ["x", "y"]}]}}
    patched = strategic_merge(target, {"spec": {"containers": [{"name": "a", "args": ["z"]}]}})
    assert patched["spec"]["containers"][0]["args"] == ["z"]


def test_it_merges_and_deletes_from_finalizer_lists():
    target = {"metadata": {"finalizers": ["a", "b"]}}
    assert strategic_merge(target, {"metadata": {"finalizers": ["c"]}}) == {
        "metadata": {"finalizers": ["a", "b", "c"]}
    }
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}
    assert strategic_merge(target, patch) == {"metadata": {"finalizers": ["b"]}}


def test_it_applies_json_patch_operations():
    target = {"a": {"b": [1, 2]}, "c": 1}
    operations = [
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "replace", "path": "/c", "value": 2},
        {"op": "remove", "path": "/a/b/0"},
        {"op": "copy", "from": "/c", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e"},
        {"op": "test", "path": "/e", "value": 2},
    ]
    assert json_patch(target, operations) == {"a": {"b": [2, 3]}, "c": 2, "e": 2}


def test_it_refuses_a_json_patch_on_a_missing_path():
    with pytest.raises(ApiError) as caught:
        json_patch({"a": 1}, [{"op": "replace", "path": "/missing", "value": 1}])
    assert caught.value.code == 422


def test_it_patches_through_http_with_each_content_type(kubesim_cluster, namespace_name):
    core = client.CoreV1Api(api_client(kubesim_cluster))
    core.create_namespace({"metadata": {"name": namespace_name, "labels": {"a": "1"}}})
    path = f"/api/v1/namespaces/{namespace_name}"
    for content_type, body, expected in (
        ("application/merge-patch+json", {"metadata": {"labels": {"b": "2"}}}, "b"),
        ("application/strategic-merge-patch+json", {"metadata": {"labels": {"c": "3"}}}, "c"),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/metadata/labels/d", "value": "4"}],
            "d",
        ),
    ):
        response = raw_request(kubesim_cluster, "PATCH", path, body, content_type=content_type)
        assert response.status == 200, response.body
        assert expected in response.json()["metadata"]["labels"]
    assert {"a", "b", "c", "d"} <= set(core.read_namespace(namespace_name).metadata.labels)


def test_it_answers_415_for_another_content_type(kubesim_cluster):
    response = raw_request(
        kubesim_cluster, "PATCH", "/api/v1/namespaces/default", {}, content_type="text/plain"
    )
    assert response.status == 415
    assert response.json()["reason"] == "UnsupportedMediaType"


def test_it_patches_a_claim_status_the_way_the_scheduler_unreserves(
    kubesim_cluster, namespace_name
):
    api = api_client(kubesim_cluster)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace_name}})
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c1"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    stable = client.ResourceV1Api(api)
    stable.create_namespaced_resource_claim(namespace_name, claim)
    consumers = [{"resource": "pods", "name": n, "uid": n} for n in ("u1", "u2")]
    stable.patch_namespaced_resource_claim_status(
        "c1", namespace_name, {"status": {"reservedFor": consumers}}
    )
    unreserve = {"status": {"reservedFor": [{"$patch": "delete", "uid": "u1"}]}}
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace_name}/resourceclaims/c1/status"
    response = raw_request(
        kubesim_cluster,
        "PATCH",
        path,
        unreserve,
        content_type="application/strategic-merge-patch+json",
    )
    assert [c["uid"] for c in response.json()["status"]["reservedFor"]] == ["u2"]


def test_a_patch_never_fails_because_a_controller_wrote_meanwhile(kubesim_private):
    namespaces = kind_for("", "namespaces")
    core = client.CoreV1Api(api_client(kubesim_private))
    core.create_namespace({"metadata": {"name": "busy"}})
    stop = threading.Event()

    def controller() -> None:
        count = 0
        while not stop.is_set():
            ns = kubesim_private.store.get(namespaces, None, "busy")
            ns["metadata"].setdefault("annotations", {})["tick"] = str(count := count + 1)
            # A controller writes what it read (a blind write would lose the patch itself).
            with contextlib.suppress(ApiError):
                kubesim_private.store.update(namespaces, ns)

    writer = threading.Thread(target=controller)
    writer.start()
    try:
        for index in range(20):
            core.patch_namespace("busy", {"metadata": {"labels": {"n": str(index)}}})
    finally:
        stop.set()
        writer.join()
    assert core.read_namespace("busy").metadata.labels["n"] == "19"
