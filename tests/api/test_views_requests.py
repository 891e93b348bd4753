"""Namespace and claim requests through the API: who may do what, and what they see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest
from tests.api.conftest import GPU, namespace_with_claim

Api = Callable[[str], APIClient]
PERSONAS = ("anonymous", "alice", "bob", "carol")


def call(client: APIClient, method: str, url: str, body: dict | None = None) -> int:
    return getattr(client, method)(url, body or {}, format="json").status_code


# (method, url, body, the status for: anonymous, alice (the owner), bob, carol (approver))
CLAIM_MATRIX = [
    ("get", "/api/v1/claims/{claim}/", None, (401, 200, 404, 200)),
    ("post", "/api/v1/claims/{claim}/approve/", None, (401, 403, 403, 200)),
    ("post", "/api/v1/claims/{claim}/reject/", {"reason": "No."}, (401, 403, 403, 200)),
    ("post", "/api/v1/claims/{claim}/retry/", None, (401, 409, 404, 409)),
    ("delete", "/api/v1/claims/{claim}/", None, (401, 200, 404, 200)),
    (
        "post",
        "/api/v1/claims/",
        {"namespace_request": "{namespace}", "name": "more", "device_class": GPU},
        (401, 201, 400, 201),
    ),
]
NAMESPACE_MATRIX = [
    ("get", "/api/v1/namespace-requests/{namespace}/", None, (401, 200, 404, 200)),
    ("post", "/api/v1/namespace-requests/{namespace}/approve/", None, (401, 403, 403, 200)),
    (
        "post",
        "/api/v1/namespace-requests/{namespace}/reject/",
        {"reason": "No."},
        (401, 403, 403, 200),
    ),
    ("post", "/api/v1/namespace-requests/{namespace}/retry/", None, (401, 409, 404, 409)),
    ("delete", "/api/v1/namespace-requests/{namespace}/", None, (401, 200, 404, 200)),
    (
        "post",
        "/api/v1/namespace-requests/",
        {"cluster": "{cluster}", "name": "team-b{namespace}"},
        (401, 201, 201, 201),
    ),
]


def _fill(template: Any, claim: ClaimRequest) -> Any:
    ids = {
        "claim": claim.pk,
        "namespace": claim.namespace_request_id,
        "cluster": claim.namespace_request.cluster_id,
    }
    if isinstance(template, dict):
        return {key: _fill(value, claim) for key, value in template.items()}
    if template in {"{claim}", "{namespace}", "{cluster}"}:
        return ids[template.strip("{}")]
    return template.format(**ids) if isinstance(template, str) else template


def statuses(api: Api, alice: User, cluster: Cluster, method: str, url: str, body: dict) -> tuple:
    """The status each persona gets, each acting on a fresh namespace and claim of alice."""
    answers = []
    for index, who in enumerate(PERSONAS):
        claim = namespace_with_claim(alice, cluster, str(index))
        answers.append(call(api(who), method, _fill(url, claim), _fill(body, claim)))
    return tuple(answers)


@pytest.mark.parametrize(
    ("method", "url", "body", "expected"),
    CLAIM_MATRIX,
    ids=[f"{m} {u}" for m, u, *_ in CLAIM_MATRIX],
)
def test_it_answers_each_persona_on_claims(
    api: Api, alice: User, cluster: Cluster, method: str, url: str, body: dict, expected: tuple
) -> None:
    assert statuses(api, alice, cluster, method, url, body) == expected


@pytest.mark.parametrize(
    ("method", "url", "body", "expected"),
    NAMESPACE_MATRIX,
    ids=[f"{m} {u}" for m, u, *_ in NAMESPACE_MATRIX],
)
def test_it_answers_each_persona_on_namespace_requests(
    api: Api, alice: User, cluster: Cluster, method: str, url: str, body: dict, expected: tuple
) -> None:
    assert statuses(api, alice, cluster, method, url, body) == expected


@pytest.mark.parametrize(
    ("who", "expected"), [("alice", ["train"]), ("bob", []), ("carol", ["train"])]
)
def test_it_lists_only_what_the_user_may_see(
    api: Api, claim: ClaimRequest, who: str, expected: list[str]
) -> None:
    claims = api(who).get("/api/v1/claims/").json()
    namespaces = api(who).get("/api/v1/namespace-requests/").json()
    assert [c["name"] for c in claims["results"]] == expected
    assert len(namespaces["results"]) == len(expected)


def test_it_requests_a_claim_and_shows_it_pending(api: Api, namespace: NamespaceRequest) -> None:
    body = {"namespace_request": namespace.pk, "name": "gpu-claim", "device_class": GPU}
    response = api("alice").post("/api/v1/claims/", body, format="json")
    assert response.status_code == 201
    data = response.json()
    assert (data["name"], data["state"], data["namespace"], data["owner"]) == (
        "gpu-claim",
        "pending",
        "team-a",
        "alice",
    )
    assert data["count"] == 1
    assert ClaimRequest.objects.get(pk=data["id"]).owner.username == "alice"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad_Name", "device_class": GPU}, "name"),
        ({"name": "ok", "device_class": "no.such.class"}, "device_class"),
        ({"name": "ok", "device_class": GPU, "count": 0}, "count"),
        ({"name": "ok", "device_class": GPU, "count": 10_000}, "count"),
        ({"name": "ok", "device_class": GPU, "selector": "device.("}, "selector"),
        ({"name": "ok", "device_class": GPU, "count": "two"}, "count"),
        ({"name": "train", "device_class": GPU}, "name"),
        ({"device_class": GPU}, "name"),
    ],
)
def test_it_says_which_field_is_wrong(
    api: Api, claim: ClaimRequest, body: dict, field: str
) -> None:
    response = api("alice").post(
        "/api/v1/claims/", {"namespace_request": claim.namespace_request_id, **body}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert ClaimRequest.objects.count() == 1


def test_it_refuses_a_namespace_name_kubernetes_would_refuse(api: Api, claim: ClaimRequest) -> None:
    body = {"cluster": claim.namespace_request.cluster_id, "name": "kube-system"}
    response = api("alice").post("/api/v1/namespace-requests/", body, format="json")
    assert response.status_code == 400
    assert "belongs to the cluster itself" in response.json()["name"][0]


def test_it_hides_whether_another_users_namespace_exists(api: Api, claim: ClaimRequest) -> None:
    taken = {"namespace_request": claim.namespace_request_id, "name": "x", "device_class": GPU}
    unknown = {**taken, "namespace_request": 999_999}
    first = api("bob").post("/api/v1/claims/", taken, format="json").json()
    second = api("bob").post("/api/v1/claims/", unknown, format="json").json()
    assert first["namespace_request"][0].replace(str(claim.namespace_request_id), "N") == second[
        "namespace_request"
    ][0].replace("999999", "N")


def test_it_approves_and_records_who_did(api: Api, claim: ClaimRequest) -> None:
    data = api("carol").post(f"/api/v1/claims/{claim.pk}/approve/").json()
    assert (data["state"], data["decided_by"]) == ("approved", "carol")
    # Approving the claim approves its pending namespace with it, as on the web.
    assert NamespaceRequest.objects.get(pk=claim.namespace_request_id).state == "approved"


def test_it_answers_409_when_the_state_forbids_it(api: Api, claim: ClaimRequest) -> None:
    api("carol").post(f"/api/v1/claims/{claim.pk}/approve/")
    response = api("carol").post(f"/api/v1/claims/{claim.pk}/approve/")
    assert response.status_code == 409
    assert "already approved" in response.json()["detail"]


def test_it_wants_a_reason_to_reject(api: Api, claim: ClaimRequest) -> None:
    response = api("carol").post(f"/api/v1/claims/{claim.pk}/reject/", {}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()
    assert ClaimRequest.objects.get(pk=claim.pk).state == "pending"


def test_it_releases_on_delete(api: Api, claim: ClaimRequest) -> None:
    response = api("alice").delete(f"/api/v1/claims/{claim.pk}/")
    assert response.json()["state"] == "released"
    assert AuditEvent.objects.filter(object_id=claim.pk, to_state="released").exists()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=pending", ["b", "a"]),
        ("state=rejected", []),
        ("state=pending&state=rejected", ["b", "a"]),
        ("namespace=team-a", ["b", "a"]),
        ("namespace=elsewhere", []),
        ("owner=alice", ["b", "a"]),
        ("owner=bob", []),
        ("ordering=name", ["a", "b"]),
        ("ordering=-created", ["b", "a"]),
        ("page_size=1", ["b"]),
        ("page_size=1&page=2", ["a"]),
    ],
)
def test_it_filters_orders_and_pages(
    api: Api, namespace: NamespaceRequest, query: str, expected: list[str]
) -> None:
    for name in ("a", "b"):
        body = {"namespace_request": namespace.pk, "name": name, "device_class": GPU}
        api("alice").post("/api/v1/claims/", body, format="json")
    data = api("carol").get(f"/api/v1/claims/?{query}").json()
    assert [claim["name"] for claim in data["results"]] == expected


def test_it_filters_by_cluster(api: Api, claim: ClaimRequest) -> None:
    cluster_id = claim.namespace_request.cluster_id
    assert len(api("alice").get(f"/api/v1/claims/?cluster={cluster_id}").json()["results"]) == 1
    assert api("alice").get(f"/api/v1/claims/?cluster={cluster_id + 1}").json()["results"] == []


def test_it_refuses_an_unknown_state_filter(api: Api, claim: ClaimRequest) -> None:
    response = api("alice").get("/api/v1/claims/?state=sleeping")
    assert response.status_code == 400
    assert "state" in response.json()


def test_it_accepts_the_browser_session_only_with_csrf(
    alice: User, namespace: NamespaceRequest
) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    body = {"namespace_request": namespace.pk, "name": "web", "device_class": GPU}
    refused = client.post("/api/v1/claims/", body, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    client.get("/api/tokens/")  # any page with a form sets the CSRF cookie
    csrf = client.cookies["csrftoken"].value
    accepted = client.post("/api/v1/claims/", body, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert accepted.status_code == 201


def test_it_lets_the_owner_see_a_claim_an_approver_made_in_her_namespace(
    api: Any, namespace: NamespaceRequest
) -> None:
    body = {"namespace_request": namespace.pk, "name": "for-alice", "device_class": GPU}
    made = api("carol").post("/api/v1/claims/", body, format="json")
    assert made.status_code == 201
    assert made.json()["owner"] == "alice"
    listed = api("alice").get("/api/v1/claims/").json()["results"]
    assert [claim["name"] for claim in listed] == ["for-alice"]
