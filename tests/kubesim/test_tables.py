"""Table responses: the columns `kubectl get` prints when it asks for `as=Table`."""

from __future__ import annotations

import http.client
import json
import ssl
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from kubesim.apiserver.tables import human_duration
from kubesim.kubelet.pod_status import node_ip
from tests.fixtures.kubesim import api_client

TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def get_table(handle, path: str) -> dict:
    url = urlsplit(handle.url)
    context = ssl.create_default_context(cadata=handle.ca_pem.decode())
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context)
    headers = {"Authorization": f"Bearer {handle.token}", "Accept": TABLE_ACCEPT}
    connection.request("GET", path, headers=headers)
    return json.loads(connection.getresponse().read())


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
    ],
)
def test_it_prints_ages_as_kubectl_does(seconds, shown):
    assert human_duration(seconds) == shown


def test_it_answers_a_list_with_a_table_of_named_columns(kubesim_cluster):
    body = get_table(kubesim_cluster, "/api/v1/nodes")
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = body["columnDefinitions"]
    assert [c["name"] for c in columns if c["priority"] == 0] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    assert [c["name"] for c in columns if c["priority"] == 1] == [
        "Internal-IP",
        "External-IP",
        "OS-Image",
        "Kernel-Version",
        "Container-Runtime",
    ]
    first = body["rows"][0]
    assert first["cells"][:3] == ["gpu-node-1", "Ready", "<none>"]
    assert first["cells"][5:7] == [node_ip("gpu-node-1"), "<none>"]
    assert first["cells"][9].startswith("containerd://")
    assert first["object"]["kind"] == "PartialObjectMetadata"
    assert first["object"]["metadata"]["name"] == "gpu-node-1"


def test_it_describes_columns_with_upstreams_field_documentation(kubesim_cluster):
    columns = get_table(kubesim_cluster, "/api/v1/pods")["columnDefinitions"]
    described = {column["name"]: column["description"] for column in columns}
    assert described["Name"].startswith("Name must be unique within a namespace.")
    assert described["Age"].startswith("CreationTimestamp is a timestamp")
    assert described["Status"] == "The aggregate status of the containers in this pod."
    assert described["IP"].startswith("podIP address allocated to the pod.")


def test_it_shows_a_claims_state(kubesim_cluster, namespace_name):
    api = api_client(kubesim_cluster)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace_name}})
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
    }
    client.ResourceV1beta1Api(api).create_namespaced_resource_claim(namespace_name, claim)
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace_name}/resourceclaims/gpu-claim"
    body = get_table(kubesim_cluster, path)
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "State", "Age"]
    assert body["rows"][0]["cells"][:2] == ["gpu-claim", "pending"]


def test_it_includes_the_whole_object_when_asked(kubesim_cluster):
    body = get_table(kubesim_cluster, "/api/v1/namespaces?includeObject=Object")
    assert body["rows"][0]["object"]["kind"] == "Namespace"
