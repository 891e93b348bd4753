"""The audit page and its CSV export (claims/web/views/audit.py): who sees it, the filters,
pages."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from claims.domain import audit
from claims.models import AuditEvent
from claims.web.views.audit import PAGE_SIZE
from tests.fixtures.portal import PASSWORD

Action = AuditEvent.Action


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def row(action: str = Action.NOTE, *, when: str = "2026-11-30T09:00:00", **fields: Any) -> int:
    with time_machine.travel(datetime.fromisoformat(when).replace(tzinfo=UTC), tick=False):
        fields = {"kind": "claim_request", "name": "train"} | fields
        return audit.record(action, **fields).pk


def shown(client: Client, **params: str) -> list[int]:
    response = client.get(reverse("audit"), params)
    assert response.status_code == 200
    return [event.pk for event in response.context["events"]]


def exported(client: Client, **params: str) -> list[dict[str, str]]:
    response = client.get(reverse("audit-export"), params)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "attachment" in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_it_shows_the_trail_to_approvers_only(alice: User, carol: User) -> None:
    assert client_of(alice).get(reverse("audit")).status_code == 403
    assert client_of(alice).get(reverse("audit-export")).status_code == 403
    assert Client().get(reverse("audit")).status_code == 302
    assert client_of(carol).get(reverse("audit")).status_code == 200


def test_it_shows_who_did_what_from_where(alice: User, carol: User) -> None:
    Client(REMOTE_ADDR="198.51.100.7").post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )
    Client(REMOTE_ADDR="198.51.100.8").post(reverse("login"), {"username": "x", "password": "y"})
    row(Action.STATE_CHANGE, from_state="applying", to_state="waiting", after={"state": "waiting"})
    html = client_of(carol).get(reverse("audit")).content.decode()
    assert "198.51.100.7" in html and "login" in html and "alice" in html
    assert "anonymous" in html and "198.51.100.8" in html  # the failed login
    assert "applying → ready · not in use" in html
    assert "&quot;state&quot;: &quot;waiting&quot;" in html  # the record, as written


def test_it_names_states_as_the_other_pages_do(carol: User) -> None:
    """The page says "ready · not in use → in use"; the CSV keeps the codes (for tools)."""
    row(Action.STATE_CHANGE, from_state="waiting", to_state="in_use")
    row(Action.STATE_CHANGE, from_state="", to_state="pending")
    html = client_of(carol).get(reverse("audit")).content.decode()
    assert "ready · not in use → in use" in html
    assert "— → pending" in html
    assert "waiting →" not in html and "→ in_use" not in html
    changes = [(line["from_state"], line["to_state"]) for line in exported(client_of(carol))]
    assert ("waiting", "in_use") in changes


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"actor": "alice"}, ["by-alice"]),
        ({"action": "login_failed"}, ["failed"]),
        ({"object_kind": "api_token"}, ["token"]),
        ({"object_name": "train-2"}, ["by-alice"]),
        ({"since": "2026-11-29T00:00", "until": "2026-11-30T00:00"}, ["token"]),
        ({"q": "GUESSING"}, ["failed"]),
        ({"q": "203.0.113"}, ["failed"]),
    ],
)
def test_it_filters_the_trail(
    alice: User, carol: User, params: dict[str, str], expected: list[str]
) -> None:
    ids = {
        "by-alice": row(actor=alice, name="train-2"),
        "failed": row(
            Action.LOGIN_FAILED,
            kind="user",
            name="mallory",
            message="Guessing.",
            request=Client(REMOTE_ADDR="203.0.113.9").get("/").wsgi_request,
        ),
        "token": row(Action.TOKEN_CREATED, kind="api_token", when="2026-11-29T12:00:00"),
    }
    wanted = [ids[name] for name in expected]
    assert shown(client_of(carol), **params) == wanted
    assert [int(r["id"]) for r in exported(client_of(carol), **params)] == wanted


@pytest.mark.parametrize(
    "params", [{"since": "yesterday"}, {"until": "0001-01-01T00:00:00+01:00"}, {"action": "x"}]
)
def test_it_says_what_is_wrong_with_a_filter(carol: User, params: dict[str, str]) -> None:
    row()
    response = client_of(carol).get(reverse("audit"), params)
    assert response.status_code == 200
    assert response.context["events"] == []
    assert "errorlist" in response.content.decode()
    export = client_of(carol).get(reverse("audit-export"), params)
    assert export.status_code == 400 and next(iter(params)) in export.json()


def test_it_pages_back_in_time(carol: User) -> None:
    ids = [row(name=f"c{n}") for n in range(PAGE_SIZE + 3)]
    client = client_of(carol)
    first = client.get(reverse("audit"), {"object_kind": "claim_request"})
    assert [e.pk for e in first.context["events"]] == ids[::-1][:PAGE_SIZE]
    older = first.context["older"]
    assert f"object_kind=claim_request&amp;before={older}" in first.content.decode()
    second = shown(client, object_kind="claim_request", before=str(older))
    assert second == ids[::-1][PAGE_SIZE:]
    assert shown(client, before="99999999999999999999999") == shown(client)


def test_it_exports_every_column_and_defuses_formulas(alice: User, carol: User) -> None:
    manifest = {"kind": "ResourceClaim", "metadata": {"name": "train"}}
    row(
        Action.STATE_CHANGE,
        actor=alice,
        name='=HYPERLINK("http://x")',
        from_state="applying",
        to_state="waiting",
        after={"state": "waiting"},
        allocation={"node": "gpu-node-1"},
        manifest_sha256=audit.manifest_sha256(manifest),
    )
    [line] = exported(client_of(carol), object_kind="claim_request")
    assert line["actor_username"] == "alice"
    assert line["object_name"] == '\'=HYPERLINK("http://x")'
    assert (line["from_state"], line["to_state"]) == ("applying", "waiting")
    assert line["after"] == '{"state": "waiting"}'
    assert line["allocation"] == '{"node": "gpu-node-1"}'
    assert line["manifest_sha256"] == audit.manifest_sha256(manifest)
    assert line["created"] == "2026-11-30T09:00:00+00:00"
    assert line["channel"] == "system" and line["client_ip"] == ""
