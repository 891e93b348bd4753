"""Verification runs, their logs and the audit trail through the API."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from claims.domain import run_observations
from claims.models import ClaimRequest, Cluster, VerificationRun
from tests.api.conftest import REAL_OUTPUT, applied_claim, started_run

Api = Callable[[str], APIClient]
PERSONAS = ("anonymous", "alice", "bob", "carol")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/api/v1/runs/{run}/", (401, 200, 404, 200)),
        ("/api/v1/runs/{run}/logs/ctr0/", (401, 200, 404, 200)),
        ("/api/v1/runs/{run}/logs/ctr1/", (401, 200, 404, 200)),
        ("/api/v1/runs/{run}/logs/ctr9/", (401, 404, 404, 404)),
    ],
)
def test_it_shows_a_run_to_its_owner_and_approvers_only(
    api: Api, alice: User, carol: User, cluster: Cluster, url: str, expected: tuple
) -> None:
    run = started_run(alice, carol, cluster, "a")
    got = tuple(api(who).get(url.format(run=run.pk)).status_code for who in PERSONAS)
    assert got == expected


def test_it_starts_runs_only_on_claims_the_user_may_use(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    got = []
    for index, who in enumerate(PERSONAS):
        claim = applied_claim(alice, carol, cluster, str(index))
        response = api(who).post("/api/v1/runs/", {"claim": claim.pk}, format="json")
        got.append(response.status_code)
    assert tuple(got) == (401, 201, 400, 201)


def test_it_starts_the_seeds_pod1_on_the_claim(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster, "a")
    response = api("alice").post("/api/v1/runs/", {"claim": claim.pk}, format="json")
    assert response.status_code == 201
    data = response.json()
    assert (data["state"], data["claim"], data["claim_name"]) == ("queued", claim.pk, "train")
    assert [log["container"] for log in data["logs"]] == ["ctr0", "ctr1"]


def test_it_queues_a_run_on_a_pending_claim_until_the_claim_is_applied(
    api: Api, alice: User, carol: User, cluster: Cluster, claim: ClaimRequest
) -> None:
    response = api("alice").post("/api/v1/runs/", {"claim": claim.pk}, format="json")
    assert response.status_code == 201
    assert response.json()["state"] == "queued"
    assert "starts as soon as the claim is applied" in response.json()["state_message"]


def test_it_explains_why_a_released_claim_cannot_run(
    api: Api, alice: User, carol: User, cluster: Cluster, claim: ClaimRequest
) -> None:
    api("alice").delete(f"/api/v1/claims/{claim.pk}/")
    response = api("alice").post("/api/v1/runs/", {"claim": claim.pk}, format="json")
    assert response.status_code == 409
    assert "released" in response.json()["detail"]
    assert not VerificationRun.objects.filter(claim=claim).exists()


def test_it_refuses_a_second_run_while_one_is_going(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "a")
    response = api("alice").post("/api/v1/runs/", {"claim": run.claim_id}, format="json")
    assert response.status_code == 409
    assert VerificationRun.objects.count() == 1


def test_it_serves_logs_as_plain_text(api: Api, alice: User, carol: User, cluster: Cluster) -> None:
    run = started_run(alice, carol, cluster, "a")
    response = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr0/")
    assert response["Content-Type"].startswith("text/plain")
    assert "Test PASSED" in response.content.decode()
    assert response["X-Log-Complete"] == "false"


def test_it_reads_logs_incrementally(api: Api, alice: User, carol: User, cluster: Cluster) -> None:
    run = started_run(alice, carol, cluster, "a")
    client = api("alice")
    client.get("/api/v1/me/")  # the token's lockout check done: what follows is the read's
    with CaptureQueriesContext(connection) as queries:
        first = client.get(f"/api/v1/runs/{run.pk}/logs/ctr0/")
    assert len(queries) == 2, [q["sql"] for q in queries.captured_queries]  # token; run + log
    offset = first["X-Next-Since"]
    nothing_new = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr0/?since={offset}")
    assert nothing_new.content == b""
    later = timezone.now()
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(later, "one more line")])
    more = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr0/?since={offset}")
    assert more.content.decode() == "one more line\n"
    assert first.content.decode() + more.content.decode() == run.logs.get().text


def test_it_says_when_a_log_is_complete(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "a")
    text = (REAL_OUTPUT / "deviceQuery-H200.txt").read_text()
    lines = [(timezone.now(), line) for line in text.splitlines()]
    run_observations.run_logs_appended(run=run, container="ctr1", lines=lines)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_finished(run=run, phase="Succeeded")
    response = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr1/")
    assert response["X-Log-Complete"] == "true"
    data = api("alice").get(f"/api/v1/runs/{run.pk}/").json()
    assert (data["state"], data["passed"]) == ("succeeded", True)
    assert "H200" in data["device_name"]


def test_a_log_the_cluster_would_not_give_is_not_complete_and_says_why(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    """Issue 23.2: a script waiting for `succeeded`, then reading the logs, got an empty log
    marked complete and no verdict, and the reason nowhere."""
    run = started_run(alice, carol, cluster, "a")
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    problem = "ctr1: 500 InternalError: no preferred addresses found; known addresses: []"
    run_observations.run_log_read(run=run, problem=problem)
    run_observations.run_finished(
        run=run, phase="Succeeded", log_problem=problem, log_retry_until=timezone.now()
    )
    response = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr1/")
    assert (response.content, response["X-Log-Complete"]) == (b"", "false")
    assert response["X-Log-Unreadable"] == problem
    data = api("alice").get(f"/api/v1/runs/{run.pk}/").json()
    assert (data["state"], data["passed"]) == ("succeeded", None)
    assert "logs could not be read" in data["state_message"]


def test_it_refuses_a_negative_offset(api: Api, alice: User, carol: User, cluster: Cluster) -> None:
    run = started_run(alice, carol, cluster, "a")
    response = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr0/?since=-1")
    assert response.status_code == 400
    assert "since" in response.json()


@pytest.mark.parametrize(("who", "expected"), [("alice", 1), ("bob", 0), ("carol", 1)])
def test_it_lists_runs_of_the_user(
    api: Api, alice: User, carol: User, cluster: Cluster, who: str, expected: int
) -> None:
    started_run(alice, carol, cluster, "a")
    assert len(api(who).get("/api/v1/runs/").json()["results"]) == expected
    assert len(api(who).get("/api/v1/runs/?state=queued").json()["results"]) == expected
    assert api(who).get("/api/v1/runs/?state=succeeded").json()["results"] == []


@pytest.mark.parametrize(("who", "expected"), [("anonymous", 401), ("bob", 200)])
def test_it_keeps_the_audit_trail_private(
    api: Api, alice: User, carol: User, cluster: Cluster, who: str, expected: int
) -> None:
    started_run(alice, carol, cluster, "a")
    response = api(who).get("/api/v1/events/")
    assert response.status_code == expected
    if expected == 200:
        assert response.json()["results"] == []


def test_it_shows_the_audit_trail_of_a_claim(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster, "a")
    query = f"object_kind=claim_request&object_id={claim.pk}"
    events = api("alice").get(f"/api/v1/events/?{query}").json()["results"]
    steps = [(e["from_state"], e["to_state"], e["actor"]) for e in events]
    assert steps == [
        ("", "pending", "alice"),
        ("pending", "approved", "carol"),
        ("approved", "applying", "system"),
        ("applying", "waiting", "system"),
    ]
    assert len(api("carol").get(f"/api/v1/events/?{query}").json()["results"]) == 4


@pytest.mark.parametrize(
    ("since", "expected"),
    [
        ("2000-01-01T00:00:00Z", 200),
        ("3172-04-09T12:32:41+17:14", 200),
        ("9999-12-31T23:00:00-05:00", 400),
        ("yesterday", 400),
    ],
)
def test_it_filters_events_by_time_without_failing(
    api: Api, alice: User, carol: User, cluster: Cluster, since: str, expected: int
) -> None:
    applied_claim(alice, carol, cluster, "a")
    response = api("alice").get("/api/v1/events/", {"since": since})
    assert response.status_code == expected
    if since.startswith("2000"):
        assert len(response.json()["results"]) == 6


@pytest.mark.parametrize(
    ("who", "expected"), [("anonymous", 401), ("alice", 200), ("bob", 404), ("carol", 200)]
)
def test_it_cancels_a_run_for_its_owner_and_approvers_only(
    api: Api, alice: User, carol: User, cluster: Cluster, who: str, expected: int
) -> None:
    run = started_run(alice, carol, cluster, "cancel")
    response = api(who).delete(f"/api/v1/runs/{run.pk}/")
    assert response.status_code == expected
    run.refresh_from_db()
    if expected == 200:
        assert response.json()["state"] == "failed"
        assert response.json()["state_message"] == f"Cancelled by {who}."
        assert run.state == "failed"
    else:
        assert run.state == "queued"


def test_it_keeps_the_claim_and_the_log_of_a_cancelled_run(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "keep")
    api("alice").delete(f"/api/v1/runs/{run.pk}/")
    assert api("alice").get(f"/api/v1/claims/{run.claim_id}/").json()["state"] == "waiting"
    log = api("alice").get(f"/api/v1/runs/{run.pk}/logs/ctr0/")
    assert "Test PASSED" in log.content.decode()
    assert log["X-Log-Complete"] == "true"


def test_it_refuses_to_cancel_a_run_that_ended(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "ended")
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_finished(run=run, phase="Succeeded")
    response = api("alice").delete(f"/api/v1/runs/{run.pk}/")
    assert response.status_code == 409
    assert response.json() == {"detail": "The run already ended (succeeded): nothing to cancel."}
    assert api("alice").get(f"/api/v1/runs/{run.pk}/").json()["state"] == "succeeded"


def test_it_releases_a_running_run_with_its_claim(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "rel")
    response = api("alice").delete(f"/api/v1/claims/{run.claim_id}/")
    assert response.status_code == 200
    answer = api("alice").get(f"/api/v1/runs/{run.pk}/").json()
    assert answer["state"] == "failed"
    assert answer["state_message"] == "The claim was released."


def test_it_says_what_the_cluster_warned_about_a_pending_pod(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    run = started_run(alice, carol, cluster, "warned")
    warning = {
        "reason": "FailedScheduling",
        "message": "0/2 nodes are available: 2 cannot allocate all claims.",
        "at": "2026-12-01T10:42:00.123456Z",
        "count": 3,
    }
    # What the sync keeps on the run while its Pod is pending (claims/worker/sync.py).
    VerificationRun.objects.filter(pk=run.pk).update(pod_warnings=[warning])

    body = api("alice").get(f"/api/v1/runs/{run.pk}/").json()

    assert body["pod_warnings"] == [warning]
