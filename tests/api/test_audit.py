"""GET /api/v1/audit/ (approvers and staff read every row, data scientists the rows about
their own things), and what the token pages and the kubeconfig endpoint record."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from claims.domain import audit
from claims.models import AuditEvent, Cluster, NamespaceRequest
from tests.fixtures.portal import granted_namespace

Api = Callable[[str], APIClient]
URL = "/api/v1/audit/"
Action = AuditEvent.Action


def row(action: str, *, when: str = "2026-11-30T09:00:00", **fields: Any) -> int:
    with time_machine.travel(datetime.fromisoformat(when).replace(tzinfo=UTC), tick=False):
        return audit.record(action, **{"kind": "claim_request", **fields}).pk


def test_it_shows_a_data_scientist_the_rows_about_their_own_things(
    api: Api, alice: User, bob: User
) -> None:
    mine = row(Action.TOKEN_CREATED, kind="api_token", owner_id=alice.pk)
    row(Action.TOKEN_CREATED, kind="api_token", owner_id=bob.pk)
    row(Action.CHANGED, kind="team", name="vision")
    assert api("anonymous").get(URL).status_code == 401
    assert [r["id"] for r in api("alice").get(URL).json()["results"]] == [mine]
    assert len(api("carol").get(URL).json()["results"]) == 3


def test_it_shows_the_trail_to_staff(api: Api, bob: User) -> None:
    bob.is_staff = True
    bob.save()
    assert api("bob").get(URL).status_code == 200


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("action=token_revoked", ["revoked"]),
        ("object_kind=user", ["login"]),
        ("object_name=tok-1", ["created", "revoked"]),
        ("since=2026-11-30T00:00:00Z&until=2026-11-30T10:00:00Z", ["created"]),
        ("q=firefox", ["login"]),
        ("action=token_created&action=login", ["created", "login"]),
    ],
)
def test_it_filters_the_trail(api: Api, query: str, expected: list[str]) -> None:
    ids = {
        "created": row(Action.TOKEN_CREATED, kind="api_token", name="tok-1"),
        "revoked": row(Action.TOKEN_REVOKED, kind="api_token", name="tok-1", when="2026-12-01"),
        "login": row(
            Action.LOGIN, kind="user", name="dave", message="via Firefox", when="2026-11-28"
        ),
    }
    response = api("carol").get(f"{URL}?{query}")
    assert response.status_code == 200
    # Newest first (ids grow with time here).
    assert [r["id"] for r in response.json()["results"]] == sorted(
        (ids[name] for name in expected), reverse=True
    )


@pytest.mark.parametrize(
    "query", ["action=nonsense", "since=tomorrow", "until=0001-01-01T00:00:00%2B01:00", "q=%00"]
)
def test_it_refuses_a_bad_filter_with_the_field_named(api: Api, query: str) -> None:
    response = api("carol").get(f"{URL}?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()


def test_it_reads_cursor_pages_newest_first(api: Api) -> None:
    ids = [row(Action.NOTE, name=f"c{n}") for n in range(5)]
    client = api("carol")
    first = client.get(f"{URL}?cursor=&page_size=3&object_kind=claim_request").json()
    assert [r["id"] for r in first["results"]] == ids[::-1][:3]
    assert "count" not in first
    second = client.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == ids[::-1][3:]


def test_it_answers_every_column(api: Api, alice: User) -> None:
    audit.record(
        Action.STATE_CHANGE,
        kind="claim_request",
        object_id=7,
        name="train",
        actor=alice,
        from_state="applying",
        to_state="waiting",
        before={"state": "applying"},
        after={"state": "waiting"},
        manifest_sha256="ab" * 32,
        allocation={"node": "n1"},
        result={"passed": True},
    )
    [event] = api("carol").get(f"{URL}?object_kind=claim_request").json()["results"]
    assert event["actor"] == "alice" and event["object_id"] == 7
    assert (event["before"], event["after"]) == ({"state": "applying"}, {"state": "waiting"})
    assert event["manifest_sha256"] == "ab" * 32
    assert (event["allocation"], event["result"]) == ({"node": "n1"}, {"passed": True})


def test_it_documents_the_endpoint(client: Client) -> None:
    document = client.get("/api/schema/?format=json").json()
    parameters = {p["name"] for p in document["paths"][URL]["get"]["parameters"]}
    assert {"actor", "action", "object_kind", "object_name", "since", "until", "q"} <= parameters
    assert {"cursor", "page_size"} <= parameters


def test_it_records_token_creation_and_revocation(alice: User) -> None:
    client = Client(REMOTE_ADDR="192.0.2.30", HTTP_USER_AGENT="curl/8.5")
    client.force_login(alice)
    page = client.post("/api/tokens/new/", {"expires_in": "7"})
    key = page.context["new"].token_key
    created = AuditEvent.objects.get(action=Action.TOKEN_CREATED)
    assert (created.actor, created.object_kind, created.object_name) == (alice, "api_token", key)
    assert (created.channel, created.client_ip, created.user_agent) == (
        "api",
        "192.0.2.30",
        "curl/8.5",
    )
    assert created.after["expiry"].startswith(str(page.context["new"].expiry.year))
    assert page.context["new_secret"] not in str(AuditEvent.objects.values_list())
    client.post("/api/tokens/revoke/", {"token_key": key})
    revoked = AuditEvent.objects.get(action=Action.TOKEN_REVOKED)
    assert (revoked.actor, revoked.object_name, revoked.owner_id) == (alice, key, alice.pk)
    client.post("/api/tokens/revoke/", {"token_key": key})  # gone already: nothing revoked
    assert AuditEvent.objects.filter(action=Action.TOKEN_REVOKED).count() == 1


def test_it_records_a_kubeconfig_issued(
    api: Api, alice: User, carol: User, cluster: Cluster, namespace_name: str
) -> None:
    ns: NamespaceRequest = granted_namespace(cluster, alice, carol, namespace_name)
    response = api("alice").post(f"/api/v1/namespace-requests/{ns.pk}/kubeconfig/")
    assert response.status_code == 200
    event = AuditEvent.objects.get(action=Action.KUBECONFIG_ISSUED)
    assert (event.actor, event.object_kind, event.object_id) == (alice, "namespace_request", ns.pk)
    assert event.channel == "api" and event.message.startswith("Kubeconfig issued")


def test_it_records_a_wrong_api_token(db: None) -> None:
    client = APIClient(REMOTE_ADDR="192.0.2.40")
    client.credentials(HTTP_AUTHORIZATION="Token gpup_not-a-real-token")
    assert client.get("/api/v1/me/").status_code == 401
    event = AuditEvent.objects.get(action=Action.LOGIN_FAILED)
    assert (event.object_name, event.channel, event.client_ip) == (
        "(api token)",
        "api",
        "192.0.2.40",
    )
    assert "not-a-real" not in str(AuditEvent.objects.values_list())
