"""POST /api/v1/namespace-requests/{id}/kubeconfig/: who gets one, what is in it, refusals."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.models import AuditEvent, Cluster, NamespaceRequest
from tests.api.test_schema import (
    RESPONSE_CHECKS,
    keep_test_connection,  # noqa: F401 (a fixture)
    schema,
)
from tests.fixtures.portal import granted_namespace, register_cluster

Api = Callable[[str], APIClient]
PATH = "/api/v1/namespace-requests/{id}/kubeconfig/"


def url(ns: NamespaceRequest) -> str:
    return PATH.format(id=ns.pk)


@pytest.fixture
def ready(namespace_name: str, alice: User, carol: User, cluster: Cluster) -> NamespaceRequest:
    return granted_namespace(cluster, alice, carol, namespace_name)


@pytest.mark.parametrize(
    ("who", "expected"), [("anonymous", 401), ("alice", 409), ("bob", 404), ("carol", 403)]
)
def test_it_answers_each_persona_about_a_namespace_not_ready(
    api: Api, namespace: NamespaceRequest, who: str, expected: int
) -> None:
    assert api(who).post(url(namespace)).status_code == expected


@pytest.mark.parametrize(("who", "expected"), [("bob", 404), ("carol", 403)])
def test_it_gives_no_one_but_the_owner_a_kubeconfig(
    api: Api, ready: NamespaceRequest, who: str, expected: int
) -> None:
    response = api(who).post(url(ready))
    assert response.status_code == expected
    assert b"token" not in response.content


def test_it_says_why_a_namespace_is_not_ready(api: Api, namespace: NamespaceRequest) -> None:
    response = api("alice").post(url(namespace), HTTP_ACCEPT="application/yaml")
    assert response.status_code == 409
    assert response.json() == {"detail": "Namespace team-a is not ready for kubectl yet."}


def test_it_answers_the_owner_with_a_kubeconfig(api: Api, ready: NamespaceRequest) -> None:
    response = api("alice").post(url(ready))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    assert response["Cache-Control"] == "no-store"
    assert response["Content-Disposition"] == (
        f'attachment; filename="kubesim-{ready.name}.kubeconfig"'
    )
    config = yaml.safe_load(response.content)
    [context] = config["contexts"]
    assert context["context"]["namespace"] == ready.name
    assert config["current-context"] == context["name"]
    assert config["users"][0]["user"]["token"]
    assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    event = AuditEvent.objects.filter(object_id=ready.pk, object_kind="namespace_request").last()
    assert event is not None and event.message.startswith("Kubeconfig issued, valid until")


def test_it_says_when_access_was_set_up(
    api: Api, namespace: NamespaceRequest, ready: NamespaceRequest
) -> None:
    not_yet = api("alice").get(f"/api/v1/namespace-requests/{namespace.pk}/").json()
    assert not_yet["access_granted_at"] is None
    done = api("alice").get(f"/api/v1/namespace-requests/{ready.pk}/").json()
    assert done["access_granted_at"]


def test_it_answers_503_when_the_cluster_does_not_answer(
    api: Api, alice: User, carol: User, kubesim_private: kubesim.Handle
) -> None:
    cluster = register_cluster(kubesim_private, name="flaky")
    try:
        ns = granted_namespace(cluster, alice, carol, "flaky-ml")
        fault = {"path": "/token$", "error_rate": 1.0, "error_codes": [503]}
        kubesim_private.admin("POST", "/_kubesim/faults", json=fault)
        response = api("alice").post(url(ns))
    finally:
        gateways.forget_gateways()
    assert response.status_code == 503
    assert response.json()["detail"] == "The cluster did not answer in time; try again in a minute."


def test_it_answers_409_with_the_clusters_words_when_it_refuses(
    api: Api, ready: NamespaceRequest, kubesim_cluster: kubesim.Handle
) -> None:
    account = f"/api/v1/namespaces/{ready.name}/serviceaccounts/gpu-portal-alice"
    kubesim_cluster.admin("DELETE", account)
    response = api("alice").post(url(ready))
    assert response.status_code == 409
    assert response.json()["detail"].startswith("The cluster refused to issue a token: ")


def test_it_documents_the_download(client: Client) -> None:
    operation = client.get("/api/schema/?format=json").json()["paths"][PATH]["post"]
    assert {"200", "401", "403", "404", "409", "503"} <= set(operation["responses"])
    ok = operation["responses"]["200"]["content"]["application/yaml"]
    assert ok["examples"]["YourKubeconfig"]["value"]["kind"] == "Config"
    # Each call issues a new token: there is no response to replay for a key.
    assert "Idempotency-Key" not in {p["name"] for p in operation["parameters"]}


@pytest.mark.usefixtures("keep_test_connection")
def test_it_answers_what_the_schema_describes(alice: User, ready: NamespaceRequest) -> None:
    token = AuthToken.objects.create(user=alice, expiry=None)[1]
    case = schema[PATH]["POST"].Case(path_parameters={"id": ready.pk})
    response = case.call(headers={"Authorization": f"Token {token}"})
    assert response.status_code == 200
    case.validate_response(response, checks=RESPONSE_CHECKS)


@pytest.fixture(autouse=True)
def forget_gateways() -> Iterator[None]:
    yield
    gateways.forget_gateways()
