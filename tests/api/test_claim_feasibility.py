"""The API refuses a claim no single node can meet, and says what is free now while pending."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib.auth.models import User
from rest_framework.test import APIClient

import kubesim
from claims.models import Cluster, NamespaceRequest
from tests.fixtures.portal import granted_namespace

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
        "held_outside_portal": 0,
        "tainted": 0,
        "free_now_in_cluster": 8,
        "node": "",
        "selector_evaluated": True,
        "summary": "",
    }
    assert created["feasibility"]["summary"].startswith("Can be satisfied: up to 4 devices")


H100 = "NVIDIA H100 80GB HBM3"


def test_it_writes_the_selector_from_the_picker_fields(
    api: Api, namespace: NamespaceRequest
) -> None:
    body = {
        "namespace_request": namespace.pk,
        "name": "picked",
        "device_class": GPU,
        "count": 2,
        "gpu_model": H100,
        "min_memory": "40Gi",
        "selector": "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'",
    }

    response = api("alice").post("/api/v1/claims/", body, format="json")

    assert response.status_code == 201
    created = response.json()
    assert (created["gpu_model"], created["min_memory"], created["mig_profile"]) == (
        H100,
        "40Gi",
        "",
    )
    assert created["selector"] == (
        f"device.attributes['gpu.nvidia.com'].productName == '{H100}' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 && "
        "(device.attributes['gpu.nvidia.com'].brand == 'Nvidia')"
    )
    assert created["feasibility"]["matching"] == 4
    assert created["dry_run_note"] == ""


def test_it_keeps_a_plain_selector_as_it_was_sent(api: Api, namespace: NamespaceRequest) -> None:
    selector = "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')"
    body = {"namespace_request": namespace.pk, "name": "plain", "device_class": GPU}

    created = api("alice").post("/api/v1/claims/", body | {"selector": selector}, format="json")

    assert created.json()["selector"] == selector
    assert created.json()["gpu_model"] == ""


def test_it_answers_bad_picks_with_field_errors_and_saves_nothing(
    api: Api, namespace: NamespaceRequest
) -> None:
    body = {"namespace_request": namespace.pk, "name": "bad", "device_class": GPU}

    memory = api("alice").post("/api/v1/claims/", body | {"min_memory": "big"}, format="json")
    model = api("alice").post("/api/v1/claims/", body | {"gpu_model": "Voodoo 2"}, format="json")
    profile = api("alice").post("/api/v1/claims/", body | {"mig_profile": "1g.5gb"}, format="json")

    assert memory.status_code == model.status_code == profile.status_code == 400
    assert "is not a memory size" in memory.json()["min_memory"][0]
    assert "No device of this class is a 'Voodoo 2'" in model.json()["gpu_model"][0]
    assert "this class has no MIG devices" in profile.json()["mig_profile"][0]
    assert not namespace.claim_requests.exists()


def test_it_answers_a_refusal_of_the_servers_dry_run_with_a_400(
    api: Api, alice: User, carol: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    ns = granted_namespace(cluster, alice, carol, f"dry-{uuid.uuid4().hex[:6]}")
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU}}
    theirs = {"metadata": {"name": "kubectl-made"}, "spec": {"devices": {"requests": [request]}}}
    kubesim_cluster.admin(
        "POST", f"/apis/resource.k8s.io/v1/namespaces/{ns.name}/resourceclaims", theirs
    )
    body = {"namespace_request": ns.pk, "name": "kubectl-made", "device_class": GPU}

    response = api("alice").post("/api/v1/claims/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "name": [
            f"A claim named kubectl-made already exists in namespace {ns.name}; "
            "choose another name."
        ]
    }
    assert not ns.claim_requests.exists()


def test_a_namespace_request_is_dry_run_too(
    api: Api, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    theirs, mine = f"theirs-{uuid.uuid4().hex[:6]}", f"mine-{uuid.uuid4().hex[:6]}"
    kubesim_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": theirs}})

    refused = api("alice").post(
        "/api/v1/namespace-requests/", {"cluster": cluster.pk, "name": theirs}, format="json"
    )
    accepted = api("alice").post(
        "/api/v1/namespace-requests/", {"cluster": cluster.pk, "name": mine}, format="json"
    )

    assert refused.status_code == 400
    assert refused.json() == {
        "name": [f"A namespace named {theirs} already exists on {cluster}; choose another name."]
    }
    assert not NamespaceRequest.objects.filter(name=theirs).exists()
    assert (accepted.status_code, accepted.json()["dry_run_note"]) == (201, "")
