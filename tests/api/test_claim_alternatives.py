"""Claims with alternatives through the API: `alternatives` in, per-index field errors out,
and the flat fields still work for one."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from claims.models import ClaimRequest, NamespaceRequest
from tests.api.conftest import GPU

Api = Callable[[str], APIClient]
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def post(api: Api, namespace: NamespaceRequest, **body: object) -> dict:
    response = api("alice").post(
        "/api/v1/claims/",
        {"namespace_request": namespace.pk, "name": "either", **body},
        format="json",
    )
    return {"status": response.status_code, **response.json()}


def test_it_creates_and_reads_a_claim_with_alternatives(
    api: Api, namespace: NamespaceRequest
) -> None:
    alternatives = [
        {"device_class": GPU, "gpu_model": H100, "count": 2},
        {"device_class": GPU, "gpu_model": A100, "count": 1},
    ]
    created = post(api, namespace, alternatives=alternatives)

    assert created["status"] == 201, created
    assert (created["device_class"], created["gpu_model"], created["count"]) == (GPU, H100, 2)
    assert [(a["name"], a["gpu_model"], a["count"]) for a in created["alternatives"]] == [
        ("h100", H100, 2),
        ("a100", A100, 1),
    ]
    assert created["allocated_alternative"] == ""
    read = api("alice").get(f"/api/v1/claims/{created['id']}/").json()
    assert read["alternatives"] == created["alternatives"]
    listed = api("alice").get("/api/v1/claims/").json()["results"][0]
    assert listed["alternatives"] == created["alternatives"]
    assert ClaimRequest.objects.get().further_alternatives[0]["gpu_model"] == A100


def test_it_keeps_the_flat_fields_for_one_alternative(
    api: Api, namespace: NamespaceRequest
) -> None:
    created = post(api, namespace, device_class=GPU, count=1)
    assert created["status"] == 201
    assert [a["device_class"] for a in created["alternatives"]] == [GPU]


def test_it_answers_field_errors_per_alternative_index(
    api: Api, namespace: NamespaceRequest
) -> None:
    alternatives = [
        {"device_class": GPU, "count": 0},
        {"device_class": GPU, "gpu_model": A100},
        {"device_class": GPU, "gpu_model": "NVIDIA B200"},
    ]
    refused = post(api, namespace, alternatives=alternatives)

    assert refused["status"] == 400
    errors = refused["alternatives"]
    assert list(errors) == ["0", "2"]
    assert list(errors["0"]) == ["count"]
    assert "No device of this class is a 'NVIDIA B200'" in errors["2"]["gpu_model"][0]
    assert not ClaimRequest.objects.exists()


def test_it_refuses_more_than_eight_alternatives(api: Api, namespace: NamespaceRequest) -> None:
    refused = post(api, namespace, alternatives=[{"device_class": GPU}] * 9)
    assert refused["status"] == 400
    assert "At most 8 alternatives" in str(refused["alternatives"])


def test_it_needs_a_device_class_or_alternatives(api: Api, namespace: NamespaceRequest) -> None:
    assert "device_class" in post(api, namespace)
    missing = post(api, namespace, alternatives=[{"gpu_model": A100}])
    assert missing["status"] == 400
    assert "device_class" in missing["alternatives"]["0"]
