"""ConfigMaps, validated as the API server does, and kube-root-ca.crt in every namespace."""

from __future__ import annotations

import base64

from kubesim.registry.kinds.configmaps import DESCRIPTION, ROOT_CA
from tests.fixtures.kubesim import create_namespace, raw_request, wait_until


def config_map(name: str, **content: object) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **content}


def test_it_publishes_the_cluster_ca_in_every_namespace(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "cm")
    path = f"/api/v1/namespaces/{namespace}/configmaps/{ROOT_CA}"
    published = wait_until(lambda: raw_request(kubesim_cluster, "GET", path).status == 200)
    assert published
    found = raw_request(kubesim_cluster, "GET", path).json()
    assert found["data"]["ca.crt"] == kubesim_cluster.ca_pem.decode()
    assert found["metadata"]["annotations"] == {"kubernetes.io/description": DESCRIPTION}
    [managed] = found["metadata"]["managedFields"]
    assert managed["manager"] == "kube-controller-manager"


def test_it_puts_the_ca_back_when_it_is_deleted(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "cm")
    path = f"/api/v1/namespaces/{namespace}/configmaps/{ROOT_CA}"
    first = wait_until(lambda: raw_request(kubesim_cluster, "GET", path).json().get("metadata"))
    assert raw_request(kubesim_cluster, "DELETE", path).status == 200
    again = wait_until(lambda: raw_request(kubesim_cluster, "GET", path).json().get("metadata"))
    assert again["uid"] != first["uid"]


def test_it_refuses_bad_keys_and_keys_in_both_bags(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "cm")
    body = config_map(
        "bad", data={"a": "1", "bad key": "x"}, binaryData={"a": base64.b64encode(b"1").decode()}
    )
    response = raw_request(
        kubesim_cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body
    )
    assert response.status == 422
    fields = {cause["field"]: cause["message"] for cause in response.json()["details"]["causes"]}
    assert fields["data[a]"] == 'Invalid value: "a": duplicate of key present in binaryData'
    assert fields["data[bad key]"].startswith('Invalid value: "bad key": a valid config key')


def test_it_keeps_an_immutable_config_map_as_it_is(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "cm")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = config_map("fixed", data={"a": "1"}, immutable=True)
    assert raw_request(kubesim_cluster, "POST", path, body).status == 201
    patch = {"data": {"a": "2"}}
    response = raw_request(
        kubesim_cluster,
        "PATCH",
        f"{path}/fixed",
        patch,
        content_type="application/merge-patch+json",
    )
    assert response.status == 422
    assert response.json()["message"] == (
        'ConfigMap "fixed" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )
