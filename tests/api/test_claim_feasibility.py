"""The API refuses a claim no single node can meet, and says what is free now while pending."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from claims.models import NamespaceRequest

Api = Callable[[str], APIClient]
GPU = "gpu.nvidia.com"


def test_it_refuses_more_devices_than_one_node_has(api: Api, namespace: NamespaceRequest) -> None:
    body = {"namespace_request": namespace.pk, "name": "big", "device_class": GPU, "count": 5}

    response = api("alice").post("/api/v1/claims/", body, format="json")

    assert response.status_code == 400
    assert response.json()["count"] == [
        "At most 4 devices of class gpu.nvidia.com sit on one node; "
        "this cluster cannot give 5 to one claim."
    ]


def test_it_says_whether_a_pending_claim_can_be_met(api: Api, namespace: NamespaceRequest) -> None:
    body = {"namespace_request": namespace.pk, "name": "two", "device_class": GPU, "count": 2}

    created = api("alice").post("/api/v1/claims/", body, format="json").json()

    assert created["feasibility"] | {"summary": "", "node": ""} == {
        "possible": True,
        "matching": 8,
        "max_on_one_node": 4,
        "free_now_on_one_node": 4,
        "free_now_in_cluster": 8,
        "node": "",
        "selector_evaluated": True,
        "summary": "",
    }
    assert created["feasibility"]["summary"].startswith("Can be satisfied: up to 4 devices")
