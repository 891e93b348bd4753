"""Discovery and OpenAPI: what the official client and kubectl read before anything else."""

from __future__ import annotations

import http.client
import json
import ssl
from urllib.parse import urlsplit

from kubernetes import client

import kubesim
from tests.fixtures.kubesim import api_client, raw_request


def test_it_serves_the_version(kubesim_cluster, kubesim_v1beta1_cluster):
    version = client.VersionApi(api_client(kubesim_cluster)).get_code()
    assert (version.major, version.minor, version.git_version) == ("1", "34", "v1.34.1")
    seed = raw_request(kubesim_v1beta1_cluster, "GET", "/version").json()
    assert seed["gitVersion"] == "v1.33.5"
    assert seed["emulationMinor"] == "33"


def test_it_lists_the_core_version_and_resources(kubesim_cluster):
    assert raw_request(kubesim_cluster, "GET", "/api").json()["versions"] == ["v1"]
    resources = raw_request(kubesim_cluster, "GET", "/api/v1").json()["resources"]
    names = {resource["name"] for resource in resources}
    assert {"namespaces", "nodes", "pods", "pods/status", "pods/log", "events"} <= names
    pods = next(r for r in resources if r["name"] == "pods")
    assert pods["namespaced"] is True
    assert pods["kind"] == "Pod"
    assert "watch" in pods["verbs"]
    assert pods["categories"] == ["all"]


def test_it_lists_the_served_resource_versions_preferring_v1(kubesim_cluster):
    groups = raw_request(kubesim_cluster, "GET", "/apis").json()["groups"]
    [resource] = [group for group in groups if group["name"] == "resource.k8s.io"]
    assert [v["version"] for v in resource["versions"]] == ["v1", "v1beta2", "v1beta1"]
    assert resource["preferredVersion"] == {
        "groupVersion": "resource.k8s.io/v1",
        "version": "v1",
    }


def test_it_serves_only_v1beta1_when_told(kubesim_v1beta1_cluster):
    group = raw_request(kubesim_v1beta1_cluster, "GET", "/apis/resource.k8s.io").json()
    assert group["kind"] == "APIGroup"
    assert [v["version"] for v in group["versions"]] == ["v1beta1"]
    unserved = raw_request(kubesim_v1beta1_cluster, "GET", "/apis/resource.k8s.io/v1")
    assert unserved.status == 404
    assert unserved.json()["message"] == "the server could not find the requested resource"
    assert unserved.json()["details"] == {}  # go-restful's generic answer inside a group


def test_it_lists_the_dra_resources_of_a_group_version(kubesim_cluster):
    document = raw_request(kubesim_cluster, "GET", "/apis/resource.k8s.io/v1beta2").json()
    assert document["groupVersion"] == "resource.k8s.io/v1beta2"
    resources = {r["name"]: r for r in document["resources"]}
    assert set(resources) >= {
        "deviceclasses",
        "resourceclaims",
        "resourceclaims/status",
        "resourceclaimtemplates",
        "resourceslices",
    }
    assert resources["resourceslices"]["namespaced"] is False
    assert resources["resourceclaims/status"]["verbs"] == ["get", "patch", "update"]


def test_it_hashes_the_storage_version_as_upstream(kubesim_cluster, kubesim_v1beta1_cluster):
    def hashes(cluster, path):
        return {
            r["name"]: r.get("storageVersionHash")
            for r in raw_request(cluster, "GET", path).json()["resources"]
        }

    # 1.34 stores resource.k8s.io as v1beta2 (1.33 knows no v1); 1.33 stores v1beta1.
    assert hashes(kubesim_cluster, "/apis/resource.k8s.io/v1")["resourceclaims"] == "EJAWH5WrAYg="
    assert hashes(kubesim_cluster, "/api/v1")["events"] == "r2yiGXH7wu8="
    seed = hashes(kubesim_v1beta1_cluster, "/apis/resource.k8s.io/v1beta1")
    assert seed["resourceclaims"] == "RnQSwRxMnsw="
    assert seed["resourceclaims/status"] is None


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def aggregated(cluster, path):
    """What kubectl asks for first: the v2 document, else the legacy one."""
    url = urlsplit(cluster.url)
    context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context)
    headers = {
        "Authorization": f"Bearer {cluster.token}",
        "Accept": f"{AGGREGATED},application/json",
    }
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    assert response.headers["Content-Type"] == AGGREGATED
    return json.loads(response.read())


def test_it_serves_aggregated_discovery_of_every_group(kubesim_cluster):
    document = aggregated(kubesim_cluster, "/apis")
    assert document["kind"] == "APIGroupDiscoveryList"
    groups = {item["metadata"]["name"]: item["versions"] for item in document["items"]}
    assert [v["version"] for v in groups["resource.k8s.io"]] == ["v1", "v1beta2", "v1beta1"]
    claims = next(
        r for r in groups["resource.k8s.io"][0]["resources"] if r["resource"] == "resourceclaims"
    )
    assert claims["scope"] == "Namespaced"
    assert claims["subresources"][0]["subresource"] == "status"
    assert "events.k8s.io" in groups


def test_it_serves_aggregated_discovery_of_the_core_group(kubesim_cluster):
    [core] = aggregated(kubesim_cluster, "/api")["items"]
    assert core["metadata"] == {}
    resources = {r["resource"]: r for r in core["versions"][0]["resources"]}
    namespaces = resources["namespaces"]
    assert "deletecollection" not in namespaces["verbs"]
    assert [s["subresource"] for s in namespaces["subresources"]] == ["finalize", "status"]
    token = resources["serviceaccounts"]["subresources"][0]["responseKind"]
    assert token == {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}


def test_it_refuses_what_discovery_does_not_list(kubesim_cluster):
    assert raw_request(kubesim_cluster, "DELETE", "/api/v1/namespaces").status == 405
    assert raw_request(kubesim_cluster, "GET", "/api/v1/namespaces/default/finalize").status == 405
    path = "/api/v1/namespaces/default/pods/p/finalize"
    assert raw_request(kubesim_cluster, "GET", path).status == 404


def test_it_indexes_openapi_v3_documents_per_group_version(kubesim_cluster):
    paths = raw_request(kubesim_cluster, "GET", "/openapi/v3").json()["paths"]
    assert set(paths) >= {"api/v1", "apis/resource.k8s.io/v1", "apis/resource.k8s.io/v1beta1"}
    assert paths["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")


def test_it_marks_patch_operations_with_their_kind_and_field_validation(kubesim_cluster):
    document = raw_request(
        kubesim_cluster, "GET", "/openapi/v3/apis/resource.k8s.io/v1beta1?hash=x"
    ).json()
    item = "/apis/resource.k8s.io/v1beta1/namespaces/{namespace}/resourceclaims/{name}"
    patch = document["paths"][item]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "resource.k8s.io",
        "version": "v1beta1",
        "kind": "ResourceClaim",
    }
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    schemas = document["components"]["schemas"]
    claim = schemas["io.k8s.api.resource.v1beta1.ResourceClaim"]
    assert claim["properties"]["spec"]["$ref"].startswith("#/components/schemas/")


def allocation_result_fields(cluster: kubesim.Handle, version: str) -> set[str]:
    path = f"/openapi/v3/apis/resource.k8s.io/{version}"
    schemas = raw_request(cluster, "GET", path).json()["components"]["schemas"]
    return set(schemas[f"io.k8s.api.resource.{version}.AllocationResult"]["properties"])


def test_it_describes_beta_versions_as_the_release_served_does(
    kubesim_cluster, kubesim_v1beta1_cluster
):
    assert "allocationTimestamp" in allocation_result_fields(kubesim_cluster, "v1beta2")
    assert "allocationTimestamp" in allocation_result_fields(kubesim_cluster, "v1beta1")
    assert "allocationTimestamp" not in allocation_result_fields(kubesim_v1beta1_cluster, "v1beta1")


def test_it_answers_404_for_an_unknown_openapi_document(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/openapi/v3/apis/nosuch.io/v1")
    assert response.status == 404


def test_it_warns_that_beta_versions_are_deprecated_from_1_35(kubesim_cluster):
    handle = kubesim.start(k8s_version="1.35.0")
    try:
        beta = raw_request(handle, "GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
        assert beta.headers["Warning"] == (
            '299 - "resource.k8s.io/v1beta1 ResourceSlice is deprecated in v1.35+, '
            'unavailable in v1.38+"'
        )
        assert (
            raw_request(handle, "GET", "/apis/resource.k8s.io/v1/resourceslices").headers["Warning"]
            is None
        )
    finally:
        handle.stop()
    on_1_34 = raw_request(kubesim_cluster, "GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
    assert on_1_34.headers["Warning"] is None
