"""Races: approvers deciding one claim at once, a script's retries of one submission at once.
The quota race (20 parallel submits for a quota of 2) is tests/claims/domain/test_quota_race.py."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from knox.models import AuthToken
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.models import ClaimRequest, Cluster
from tests.fixtures.portal import make_user, register_cluster, state_of, wait_until
from tests.reliability.checks import APPLIED, GPU, pending_claims, resource_claims, transitions_to
from tests.reliability.conftest import figure

pytestmark = pytest.mark.django_db(transaction=True)
RACERS = 10


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="private")
    gateways.forget_gateways()


def token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=user)[1]}")
    return client


def all_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in threads released together, each on its own database connection."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = calls[index]()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_approvers_racing_over_one_claim_approve_and_apply_it_once(
    alice: User,
    private_cluster: Cluster,
    kubesim_private: kubesim.Handle,
    celery_worker_process: Any,
) -> None:
    [claim] = pending_claims(alice, private_cluster, "raced", 1)
    approvers = [make_user(f"approver{i}", approver=True) for i in range(RACERS)]
    clients = [token_client(approver) for approver in approvers]
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    url = f"/api/v1/claims/{claim.pk}/approve/"

    def approve(client: APIClient) -> int:
        return int(client.post(url).status_code)

    answers = all_at_once([partial(approve, client) for client in clients])
    wait_until(lambda: state_of(claim) == APPLIED, timeout=30)
    assert Counter(answers) == {200: 1, 409: RACERS - 1}
    assert transitions_to([claim], "approved") == {claim.pk: 1}
    assert transitions_to([claim], APPLIED) == {claim.pk: 1}
    assert len(resource_claims(kubesim_private, claim.namespace)) == 1
    creates = kubesim_private.admin("GET", "/_kubesim/counters")["requests"]
    assert creates.get("create resourceclaims") == 1
    figure(
        "approval race",
        f"{RACERS} approvers at once: {dict(sorted(Counter(answers).items()))}, "
        "1 approved transition, 1 create of the ResourceClaim",
    )


def test_retries_of_one_submission_racing_create_one_claim(alice: User, cluster: Cluster) -> None:
    [first] = pending_claims(alice, cluster, "keyed", 1)
    body = {"namespace_request": first.namespace_request_id, "name": "once", "device_class": GPU}
    clients = [token_client(alice) for _ in range(RACERS)]

    def submit(client: APIClient) -> tuple[int, Any]:
        response = client.post("/api/v1/claims/", body, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        return response.status_code, response.json()

    answers = all_at_once([partial(submit, client) for client in clients])
    assert {status for status, _ in answers} == {201}
    assert len({answer["id"] for _, answer in answers}) == 1
    assert ClaimRequest.objects.filter(name="once").count() == 1
    figure(
        "submission race",
        f"{RACERS} retries with one Idempotency-Key at once: {RACERS}x201 naming the same claim, "
        "1 claim",
    )
