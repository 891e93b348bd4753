"""POST /api/v1/claims/preview/: the picker's CEL, feasibility and options without a claim."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from claims.models import ClaimRequest, Cluster, NamespaceRequest

Api = Callable[[str], APIClient]
GPU = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
URL = "/api/v1/claims/preview/"


def test_it_writes_the_cel_and_judges_it_on_the_namespaces_cluster(
    api: Api, namespace: NamespaceRequest
) -> None:
    body = {
        "namespace_request": namespace.pk,
        "device_class": GPU,
        "count": 2,
        "gpu_model": H100,
        "min_memory": "40Gi",
        "selector": "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'",
    }

    response = api("alice").post(URL, body, format="json")

    assert response.status_code == 200
    preview = response.json()
    generated = (
        f"device.attributes['gpu.nvidia.com'].productName == '{H100}' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    )
    assert preview["generated_selector"] == generated
    written = "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"
    assert preview["selector"] == f"{generated} && ({written})"
    assert (preview["cluster"], preview["cluster_name"]) == (namespace.cluster_id, "kubesim")
    feasible = preview["feasibility"]
    assert (feasible["matching"], feasible["max_on_one_node"], feasible["possible"]) == (4, 4, True)
    assert feasible["line"] == "4 devices match, 4 free now, at most 4 on one node"
    assert feasible["summary"].startswith("Can be satisfied: up to 4 devices")
    assert H100 in preview["options"]["models"]
    assert preview["options"]["domain"] == GPU
    assert not ClaimRequest.objects.exists()


def test_it_previews_a_cluster_by_id_or_the_only_one(api: Api, cluster: Cluster) -> None:
    by_id = api("bob").post(URL, {"cluster": cluster.pk, "device_class": GPU}, format="json")
    only = api("bob").post(URL, {"device_class": GPU, "count": 5}, format="json")

    assert by_id.status_code == only.status_code == 200
    assert by_id.json()["generated_selector"] == "" and by_id.json()["selector"] == ""
    assert by_id.json()["feasibility"]["matching"] == 8
    assert only.json()["cluster"] == cluster.pk
    assert only.json()["feasibility"]["possible"] is False
    assert only.json()["feasibility"]["summary"].startswith(
        "Cannot be satisfied with this count: up to 4 devices of class gpu.nvidia.com on one node."
    )


def test_it_answers_bad_fields_with_a_400_per_field(api: Api, cluster: Cluster) -> None:
    body = {
        "cluster": cluster.pk,
        "device_class": "tpu.google.com",
        "gpu_model": "Voodoo 2",
        "min_memory": "big",
        "selector": "device.attributes[",
        "count": 0,
    }

    response = api("alice").post(URL, body, format="json")
    picks = api("alice").post(URL, body | {"device_class": GPU, "count": 1}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"count"}  # the input's types first, as everywhere
    assert picks.status_code == 400
    errors = picks.json()
    assert "No device of this class is a 'Voodoo 2'" in errors["gpu_model"][0]
    assert "is not a memory size" in errors["min_memory"][0]
    assert errors["selector"][0].startswith("Not a valid CEL expression")
    unknown = api("alice").post(URL, {"device_class": "tpu.google.com"}, format="json")
    assert unknown.status_code == 400
    assert unknown.json()["device_class"][0].startswith("'tpu.google.com' is not a device class")


def test_it_answers_cel_that_does_not_compile_with_where_and_what_not_the_parsers_dump(
    api: Api, cluster: Cluster
) -> None:
    body = {"cluster": cluster.pk, "device_class": GPU, "selector": "device.driver == == 'x'"}

    response = api("alice").post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "selector": [
            "Not a valid CEL expression at line 1, column 18: a value is missing before '=='."
        ]
    }


def test_it_says_plainly_when_no_device_matches(api: Api, cluster: Cluster) -> None:
    body = {"cluster": cluster.pk, "device_class": GPU, "min_memory": "200Gi"}

    feasible = api("alice").post(URL, body, format="json").json()["feasibility"]

    assert (feasible["possible"], feasible["matching"]) == (False, 0)
    assert feasible["summary"] == (
        "Cannot be satisfied: no device of class gpu.nvidia.com matches the model, memory, "
        "MIG profile or selector."
    )
    assert feasible["line"] == (
        "No device of class gpu.nvidia.com matches the model, memory, MIG profile or selector"
    )


def test_it_needs_a_namespace_of_ones_own_and_a_login(
    api: Api, namespace: NamespaceRequest
) -> None:
    body = {"namespace_request": namespace.pk, "device_class": GPU}

    bob = api("bob").post(URL, body, format="json")
    anonymous = api("anonymous").post(URL, body, format="json")

    assert bob.status_code == 400
    assert bob.json() == {"namespace_request": [f"You have no namespace request {namespace.pk}."]}
    assert anonymous.status_code == 401


def test_it_is_in_the_openapi_schema(api: Api) -> None:
    schema = api("alice").get("/api/schema/", {"format": "json"}).json()

    operation = schema["paths"]["/api/v1/claims/preview/"]["post"]
    assert "200" in operation["responses"] and "400" in operation["responses"]
    assert set(schema["components"]["schemas"]["PreviewOutput"]["properties"]) >= {
        "generated_selector",
        "selector",
        "feasibility",
        "options",
    }
