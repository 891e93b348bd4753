"""Server-side apply: create, no-op re-apply, managedFields, conflicts, force, field removal."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, dynamic

from kubesim.registry.apply import field_paths, from_fields_v1, to_fields_v1
from tests.fixtures.kubesim import api_client, raw_request

APPLY = "application/apply-patch+yaml"


def apply(handle, path: str, body: dict, manager: str, force: bool = False):
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return raw_request(handle, "PATCH", path + query, body, content_type=APPLY)


def namespace_config(name: str, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_it_creates_with_201_then_reapplying_changes_nothing(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    config = namespace_config(namespace_name, {"team": "a"})
    created = apply(kubesim_cluster, path, config, "portal")
    assert created.status == 201
    again = apply(kubesim_cluster, path, config, "portal")
    assert again.status == 200
    assert (
        again.json()["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]
    )
    assert again.json()["metadata"]["managedFields"] == created.json()["metadata"]["managedFields"]


def test_it_records_the_appliers_fields(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    applied = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "portal")
    [entry] = [e for e in applied.json()["metadata"]["managedFields"] if e["manager"] == "portal"]
    assert entry["operation"] == "Apply"
    assert entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {"f:a": {}}}}


def test_it_answers_409_when_another_manager_owns_a_field(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "first")
    refused = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "2"}), "second")
    assert refused.status == 409
    status = refused.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "first": .metadata.labels.a'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "first"',
            "field": ".metadata.labels.a",
        }
    ]


def test_it_takes_over_a_field_with_force(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "first")
    forced = apply(
        kubesim_cluster, path, namespace_config(namespace_name, {"a": "2"}), "second", force=True
    )
    assert forced.status == 200
    assert forced.json()["metadata"]["labels"]["a"] == "2"
    managers = {e["manager"] for e in forced.json()["metadata"]["managedFields"]}
    assert "first" not in managers
    assert "second" in managers


def test_it_shares_a_field_when_both_managers_want_the_same_value(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "first")
    same = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "second")
    assert same.status == 200
    assert {"first", "second"} <= {e["manager"] for e in same.json()["metadata"]["managedFields"]}


def test_it_removes_a_field_its_manager_stopped_applying(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1", "b": "2"}), "portal")
    trimmed = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "portal")
    labels = trimmed.json()["metadata"]["labels"]
    assert "b" not in labels
    assert labels["a"] == "1"


def test_it_conflicts_with_a_field_set_by_an_update(kubesim_cluster, namespace_name):
    core = client.CoreV1Api(api_client(kubesim_cluster))
    core.create_namespace(namespace_config(namespace_name, {"a": "1"}), field_manager="creator")
    path = f"/api/v1/namespaces/{namespace_name}"
    refused = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "2"}), "portal")
    assert refused.status == 409
    assert refused.json()["message"].startswith(
        'Apply failed with 1 conflict: conflict with "creator" using v1 at '
    )


def test_it_requires_a_field_manager_for_apply(kubesim_cluster):
    response = raw_request(
        kubesim_cluster, "PATCH", "/api/v1/namespaces/default", {}, content_type=APPLY
    )
    assert response.status == 422
    assert response.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )


def test_it_refuses_force_on_other_patches(kubesim_cluster):
    response = raw_request(
        kubesim_cluster,
        "PATCH",
        "/api/v1/namespaces/default?force=true",
        {},
        content_type="application/merge-patch+json",
    )
    assert response.status == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in response.body.decode()


def test_the_dynamic_client_applies_a_claim_in_v1beta1_and_reads_it_in_v1(
    kubesim_cluster, namespace_name
):
    api = api_client(kubesim_cluster)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace_name}})
    claims = dynamic.DynamicClient(api).resources.get(
        api_version="resource.k8s.io/v1beta1", kind="ResourceClaim"
    )
    body = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": namespace_name},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
    }
    first = claims.server_side_apply(body=body, field_manager="gpu-portal", force_conflicts=True)
    second = claims.server_side_apply(body=body, field_manager="gpu-portal", force_conflicts=True)
    assert first.metadata.resourceVersion == second.metadata.resourceVersion
    stable = client.ResourceV1Api(api).read_namespaced_resource_claim("gpu-claim", namespace_name)
    assert stable.spec.devices.requests[0].exactly.device_class_name == "gpu.nvidia.com"


def test_it_answers_a_status_apply_on_a_missing_object_with_404(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}/status"
    response = apply(kubesim_cluster, path, namespace_config(namespace_name, {}), "portal")
    assert response.status == 404


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}},
        {"spec": {"containers": [{"name": "c", "image": "i", "args": ["a"]}]}},
    ],
)
def test_it_round_trips_field_sets_through_fields_v1(obj):
    paths = field_paths(obj)
    assert from_fields_v1(json.loads(json.dumps(to_fields_v1(paths)))) == paths


def test_it_names_keyed_list_items_as_upstream_does():
    paths = field_paths({"spec": {"containers": [{"name": "ctr0", "image": "i"}]}})
    assert ("f:spec", "f:containers", 'k:{"name":"ctr0"}', "f:image") in paths
    assert ("f:spec", "f:containers", 'k:{"name":"ctr0"}', ".") in paths


def test_it_answers_409_when_the_applied_resource_version_is_stale(kubesim_cluster, namespace_name):
    path = f"/api/v1/namespaces/{namespace_name}"
    created = apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "1"}), "portal")
    apply(kubesim_cluster, path, namespace_config(namespace_name, {"a": "2"}), "portal")
    stale = namespace_config(namespace_name, {"a": "3"})
    stale["metadata"]["resourceVersion"] = created.json()["metadata"]["resourceVersion"]
    response = apply(kubesim_cluster, path, stale, "portal")
    assert response.status == 409
    assert "the object has been modified" in response.json()["message"]
