"""Idempotency-Key: a script retrying a POST gets the first answer, never a second object."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from claims.api.models import IdempotencyRecord
from claims.api.tasks import purge_expired_idempotency
from claims.models import ClaimRequest, NamespaceRequest
from tests.api.conftest import GPU

Api = Callable[[str], APIClient]


def post_claim(client: APIClient, namespace: NamespaceRequest, key: str, name: str = "gpu") -> Any:
    body = {"namespace_request": namespace.pk, "name": name, "device_class": GPU}
    return client.post("/api/v1/claims/", body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_it_replays_the_first_response(api: Api, namespace: NamespaceRequest) -> None:
    client = api("alice")
    first = post_claim(client, namespace, "key-1")
    again = post_claim(client, namespace, "key-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert ClaimRequest.objects.count() == 1


def test_it_refuses_the_same_key_with_another_body(api: Api, namespace: NamespaceRequest) -> None:
    client = api("alice")
    post_claim(client, namespace, "key-1")
    other = post_claim(client, namespace, "key-1", name="another")
    assert other.status_code == 422
    assert "different request" in other.json()["detail"]
    assert ClaimRequest.objects.count() == 1


def test_it_keeps_keys_apart_per_user(api: Api, namespace: NamespaceRequest) -> None:
    post_claim(api("alice"), namespace, "shared-key")
    # carol (an approver) may put a claim in alice's namespace: her key is hers alone.
    response = post_claim(api("carol"), namespace, "shared-key", name="carols")
    assert response.status_code == 201
    assert ClaimRequest.objects.count() == 2


def test_it_creates_again_with_a_new_key(api: Api, namespace: NamespaceRequest) -> None:
    client = api("alice")
    post_claim(client, namespace, "key-1")
    response = post_claim(client, namespace, "key-2")
    assert response.status_code == 400
    assert "already exists" in response.json()["name"][0]


def test_it_forgets_nothing_when_a_request_fails(api: Api, namespace: NamespaceRequest) -> None:
    client = api("alice")
    body = {"namespace_request": namespace.pk, "name": "Bad Name", "device_class": GPU}
    failed = client.post("/api/v1/claims/", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert failed.status_code == 400
    # A refused request stores nothing, so the key can carry the corrected body.
    assert post_claim(client, namespace, "k").status_code == 201


def test_it_guards_actions_too(api: Api, claim: ClaimRequest) -> None:
    client = api("carol")
    url = f"/api/v1/claims/{claim.pk}/approve/"
    first = client.post(url, HTTP_IDEMPOTENCY_KEY="approve-7")
    again = client.post(url, HTTP_IDEMPOTENCY_KEY="approve-7")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["state"] == "approved"
    assert client.post(url).status_code == 409


def test_it_refuses_a_key_it_cannot_keep(api: Api, namespace: NamespaceRequest) -> None:
    response = post_claim(api("alice"), namespace, "x" * 300)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()


def test_it_keeps_records_in_the_database(api: Api, namespace: NamespaceRequest) -> None:
    response = post_claim(api("alice"), namespace, "key-1")
    record = IdempotencyRecord.objects.get(key="key-1")
    assert record.response_body is not None
    assert (record.status_code, record.response_body["id"]) == (201, response.json()["id"])


def test_it_lets_an_expired_key_be_used_again(api: Api, namespace: NamespaceRequest) -> None:
    client = api("alice")
    post_claim(client, namespace, "key-1")
    IdempotencyRecord.objects.update(created=timezone.now() - timedelta(days=2))
    response = post_claim(client, namespace, "key-1", name="next-day")
    assert response.status_code == 201
    assert response.json()["name"] == "next-day"
    assert IdempotencyRecord.objects.get(key="key-1").response_body["name"] == "next-day"


def test_the_beat_purges_expired_records_not_fresh_ones(
    api: Api, namespace: NamespaceRequest
) -> None:
    client = api("alice")
    post_claim(client, namespace, "old-key")
    IdempotencyRecord.objects.update(created=timezone.now() - timedelta(days=2))
    post_claim(client, namespace, "new-key", name="today")
    # A POST no longer deletes expired records on its way (the beat does).
    assert IdempotencyRecord.objects.filter(key="old-key").exists()
    assert purge_expired_idempotency() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["new-key"]


@pytest.mark.django_db(transaction=True)
def test_it_creates_one_claim_when_two_retries_race(api: Api, namespace: NamespaceRequest) -> None:
    clients = [api("alice"), api("alice")]
    start = threading.Barrier(len(clients))
    answers: list[tuple[int, dict]] = []

    def send(client: APIClient) -> None:
        start.wait()
        response = post_claim(client, namespace, "raced-key")
        answers.append((response.status_code, response.json()))
        connection.close()

    threads = [threading.Thread(target=send, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _ in answers] == [201, 201]
    assert answers[0][1] == answers[1][1]
    assert ClaimRequest.objects.count() == 1
