"""Long-poll: GET ...?wait=N&state=S answers as soon as the state is no longer S."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.test import APIClient

from claims.domain import services
from claims.models import ClaimRequest, Cluster
from tests.api.conftest import started_run

Api = Callable[[str], APIClient]
# s: an answer "at once" comes well within this, a wait of 30 s asked for would not. Generous:
# the test tells the two apart, it does not time the answer (bench/ does).
SOON = 10


def timed_get(client: APIClient, url: str) -> tuple[float, dict]:
    started = time.monotonic()
    response = client.get(url)
    assert response.status_code == 200, response.content
    return time.monotonic() - started, response.json()


def test_it_answers_at_once_when_the_state_already_differs(api: Api, claim: ClaimRequest) -> None:
    elapsed, data = timed_get(api("alice"), f"/api/v1/claims/{claim.pk}/?wait=30&state=approved")
    assert elapsed < SOON
    assert data["state"] == "pending"


@pytest.mark.django_db(transaction=True)
def test_it_answers_as_soon_as_the_state_changes(
    api: Api, carol: User, claim: ClaimRequest
) -> None:
    def approve_soon() -> None:
        time.sleep(0.6)
        services.claim_request_approve(user=carol, claim_request=claim)
        connection.close()

    approver = threading.Thread(target=approve_soon)
    approver.start()
    elapsed, data = timed_get(api("alice"), f"/api/v1/claims/{claim.pk}/?wait=30&state=pending")
    approver.join()
    assert data["state"] == "approved"
    assert 0.5 < elapsed < SOON


def test_it_answers_with_the_current_state_after_the_wait(api: Api, claim: ClaimRequest) -> None:
    elapsed, data = timed_get(api("alice"), f"/api/v1/claims/{claim.pk}/?wait=1&state=pending")
    assert data["state"] == "pending"
    assert 0.9 < elapsed < SOON


def test_it_reads_the_database_gently_while_waiting(api: Api, claim: ClaimRequest) -> None:
    client = api("alice")
    with CaptureQueriesContext(connection) as queries:
        client.get(f"/api/v1/claims/{claim.pk}/?wait=2&state=pending")
    # About one read per 0.3 s, plus the token check and the answer itself.
    assert len(queries) < 20


@override_settings(API_LONG_POLL_MAX_SECONDS=1)
def test_it_caps_the_wait(api: Api, claim: ClaimRequest) -> None:
    elapsed, _ = timed_get(api("alice"), f"/api/v1/claims/{claim.pk}/?wait=30&state=pending")
    assert elapsed < SOON


def test_it_waits_on_runs_too(api: Api, alice: User, carol: User, cluster: Cluster) -> None:
    run = started_run(alice, carol, cluster, "a")
    elapsed, data = timed_get(api("alice"), f"/api/v1/runs/{run.pk}/?wait=1&state=queued")
    assert (data["state"], elapsed > 0.9) == ("queued", True)


@pytest.mark.parametrize(
    ("query", "field"),
    [("wait=soon&state=pending", "wait"), ("wait=5", "state"), ("wait=5&state=asleep", "state")],
)
def test_it_says_what_is_wrong_with_the_wait(
    api: Api, claim: ClaimRequest, query: str, field: str
) -> None:
    response = api("alice").get(f"/api/v1/claims/{claim.pk}/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_it_does_not_wait_on_someone_elses_claim(api: Api, claim: ClaimRequest) -> None:
    started = time.monotonic()
    response = api("bob").get(f"/api/v1/claims/{claim.pk}/?wait=30&state=pending")
    assert (response.status_code, time.monotonic() - started < SOON) == (404, True)


@override_settings(LIVE_WAITERS_PER_USER=0)
def test_a_wait_it_cannot_hold_answers_at_once_and_says_when_to_ask_again(
    api: Api, claim: ClaimRequest
) -> None:
    """Past the bound on waiting requests the answer comes at once; Retry-After keeps a
    client from asking again at once, in a loop that would spin."""
    started = time.monotonic()
    response = api("alice").get(f"/api/v1/claims/{claim.pk}/?wait=30&state=pending")
    assert (response.status_code, response.json()["state"]) == (200, "pending")
    assert time.monotonic() - started < SOON
    assert response["Retry-After"] == "1"
    waited = api("alice").get(f"/api/v1/claims/{claim.pk}/?wait=1&state=approved")
    assert "Retry-After" not in waited  # answered as the state differs: nothing was refused
