"""ServiceAccounts and TokenRequest: tokens that authenticate as the ServiceAccount until they
expire or the ServiceAccount goes."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime

import pytest

from tests.fixtures.kubesim import create_namespace, raw_request, service_account_token

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def _account(handle, namespace: str, name: str = "runner") -> dict:
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    return handle.admin("POST", path, {"metadata": {"name": name}})


def _payload(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _whoami(handle, token: str):
    return raw_request(handle, "POST", WHOAMI, REVIEW, token=token)


@pytest.fixture
def account(kubesim_cluster):
    namespace = create_namespace(kubesim_cluster, "sa")
    return namespace, _account(kubesim_cluster, namespace)


def test_it_issues_a_signed_token_for_a_service_account(kubesim_cluster, account):
    namespace, sa = account
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/runner/token"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    response = raw_request(kubesim_cluster, "POST", path, body)
    assert response.status == 201
    answer = response.json()
    assert answer["kind"] == "TokenRequest"
    assert answer["metadata"]["name"] == "runner"
    assert answer["spec"]["expirationSeconds"] == 3600
    assert answer["spec"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    token = answer["status"]["token"]
    assert token.count(".") == 2
    claims = _payload(token)
    assert claims["sub"] == f"system:serviceaccount:{namespace}:runner"
    assert claims["kubernetes.io"]["serviceaccount"]["uid"] == sa["metadata"]["uid"]
    expires = datetime.strptime(answer["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    left = expires.replace(tzinfo=UTC).timestamp() - time.time()
    assert 3590 < left <= 3601


def test_the_token_authenticates_as_the_service_account(kubesim_cluster, account):
    namespace, sa = account
    token = service_account_token(kubesim_cluster, namespace, "runner")
    response = _whoami(kubesim_cluster, token)
    assert response.status == 201
    assert response.json()["status"]["userInfo"] == {
        "username": f"system:serviceaccount:{namespace}:runner",
        "uid": sa["metadata"]["uid"],
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{namespace}",
            "system:authenticated",
        ],
    }


def test_it_refuses_an_expiration_under_ten_minutes(kubesim_cluster, account):
    namespace, _ = account
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/runner/token"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
    response = raw_request(
        kubesim_cluster, "POST", path, body | {"spec": {"expirationSeconds": 599}}
    )
    assert response.status == 422
    assert response.json()["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
        "Invalid value: 599: may not specify a duration less than 10 minutes"
    )
    ok = raw_request(kubesim_cluster, "POST", path, body | {"spec": {"expirationSeconds": 600}})
    assert ok.json()["spec"]["expirationSeconds"] == 600


def test_it_answers_404_for_a_missing_service_account(kubesim_cluster, account):
    namespace, _ = account
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/nobody/token"
    response = raw_request(kubesim_cluster, "POST", path, {"spec": {}})
    assert response.status == 404
    assert response.json()["message"] == 'serviceaccounts "nobody" not found'


def test_an_expired_token_gets_401(kubesim_cluster, account):
    namespace, _ = account
    sa = kubesim_cluster.store.get(
        kubesim_cluster.api.kinds[("", "serviceaccounts")], namespace, "runner"
    )
    issue = kubesim_cluster.api.authenticator.issue
    audiences = ["https://kubernetes.default.svc.cluster.local"]
    expired = issue(sa, audiences, 600, time.time() - 601)
    assert _whoami(kubesim_cluster, expired).status == 401
    assert _whoami(kubesim_cluster, issue(sa, audiences, 600, time.time() - 590)).status == 201


def test_a_token_stops_working_when_its_service_account_goes(kubesim_cluster, account):
    namespace, _ = account
    token = service_account_token(kubesim_cluster, namespace, "runner")
    assert _whoami(kubesim_cluster, token).status == 201
    kubesim_cluster.admin("DELETE", f"/api/v1/namespaces/{namespace}/serviceaccounts/runner")
    response = _whoami(kubesim_cluster, token)
    assert response.status == 401
    assert response.json()["reason"] == "Unauthorized"
    _account(kubesim_cluster, namespace)  # the same name again, another uid
    assert _whoami(kubesim_cluster, token).status == 401


def test_tokens_for_other_audiences_or_tampered_ones_get_401(kubesim_cluster, account):
    namespace, _ = account
    other = service_account_token(kubesim_cluster, namespace, "runner", audiences=["vault"])
    assert _whoami(kubesim_cluster, other).status == 401
    token = service_account_token(kubesim_cluster, namespace, "runner")
    header, _, signature = token.split(".")
    claims = _payload(token) | {"sub": "system:admin"}
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert _whoami(kubesim_cluster, f"{header}.{forged}.{signature}").status == 401
    assert _whoami(kubesim_cluster, "a.b.c").status == 401


def test_service_accounts_are_listed_in_discovery_with_the_token_subresource(kubesim_cluster):
    resources = raw_request(kubesim_cluster, "GET", "/api/v1").json()["resources"]
    by_name = {resource["name"]: resource for resource in resources}
    assert by_name["serviceaccounts"]["shortNames"] == ["sa"]
    assert by_name["serviceaccounts/token"] == {
        "name": "serviceaccounts/token",
        "singularName": "",
        "namespaced": True,
        "group": "authentication.k8s.io",
        "version": "v1",
        "kind": "TokenRequest",
        "verbs": ["create"],
    }
