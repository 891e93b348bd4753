"""A team's webhook: a signed JSON POST, retried with back-off by the real Celery worker,
against an HTTP receiver on loopback that the test starts and that checks the signature."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User

from claims.domain import services
from claims.models import Cluster, Team, TeamMembership, TeamWebhook, WebhookDelivery
from claims.notify import webhooks
from tests.fixtures.portal import wait_until

SECRET = "s3cret-for-the-test"


@dataclass
class Receiver:
    """Answers the statuses given, one per request (the last one from then on)."""

    statuses: list[int]
    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(statuses=[200])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            signed = hmac.compare_digest(self.headers.get("X-Portal-Signature", ""), expected)
            state.received.append(
                {
                    "body": json.loads(body),
                    "signed": signed,
                    "event": self.headers["X-Portal-Event"],
                }
            )
            status = state.statuses.pop(0) if len(state.statuses) > 1 else state.statuses[0]
            self.send_response(status if signed else 401)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/gpu"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def team_webhook(user: User, url: str) -> TeamWebhook:
    team = Team.objects.create(name=f"team-{uuid.uuid4().hex[:6]}")
    TeamMembership.objects.create(team=team, user=user)
    return TeamWebhook.objects.create(team=team, url=url, secret=SECRET)


def test_it_signs_the_body_with_hmac_sha256() -> None:
    body = b'{"event":"approved"}'
    expected = hmac.new(b"key", body, hashlib.sha256).hexdigest()
    assert webhooks.sign("key", body) == f"sha256={expected}"


@pytest.mark.django_db(transaction=True)
def test_it_retries_a_failed_delivery_until_the_receiver_takes_it(
    alice: User, carol: User, cluster: Cluster, receiver: Receiver, celery_worker_process: Any
) -> None:
    receiver.statuses = [500, 200]
    webhook = team_webhook(alice, receiver.url)
    ns = services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"hook-{uuid.uuid4().hex[:6]}"
    )
    services.namespace_request_reject(user=carol, namespace_request=ns, reason="Not this week.")

    delivery = wait_until(
        lambda: WebhookDelivery.objects.filter(webhook=webhook, state="delivered").first(),
        timeout=30,
    )
    assert (delivery.attempts, delivery.last_status, delivery.event) == (2, 200, "rejected")
    first, second = receiver.received
    assert first["signed"] and second["signed"]
    assert first["body"] == second["body"]  # the same delivery, tried again
    body = second["body"]
    assert body["delivery"] == delivery.pk
    assert body["event"] == "rejected" and second["event"] == "rejected"
    assert body["message"] == "Not this week."
    assert body["object"] | {"url": ""} == {
        "kind": "namespace",
        "id": ns.pk,
        "name": ns.name,
        "state": "rejected",
        "owner": "alice",
        "url": "",
    }
    assert body["object"]["url"].endswith(f"/namespaces/{ns.pk}/")


@pytest.mark.django_db
def test_it_logs_each_attempt_and_tells_retry_from_refusal(alice: User, receiver: Receiver) -> None:
    webhook = team_webhook(alice, receiver.url)
    delivery = WebhookDelivery.objects.create(webhook=webhook, event="failed", payload={"a": 1})
    receiver.statuses = [503, 429, 410]
    assert webhooks.attempt(delivery) is False  # tried again later
    assert webhooks.attempt(delivery) is False
    assert webhooks.attempt(delivery) is None  # gone for good: no retry helps
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status, delivery.state) == (3, 410, "pending")
    webhooks.give_up(delivery)
    delivery.refresh_from_db()
    assert delivery.state == "failed"

    webhook.secret = "another secret"  # the receiver refuses the signature: 401
    webhook.save()
    delivery = WebhookDelivery.objects.create(webhook=webhook, event="failed", payload={})
    assert webhooks.attempt(delivery) is None
    assert not receiver.received[-1]["signed"]


@pytest.mark.django_db
def test_an_unreachable_receiver_is_tried_again(alice: User) -> None:
    webhook = team_webhook(alice, "http://127.0.0.1:9/nobody-listens")
    delivery = WebhookDelivery.objects.create(webhook=webhook, event="failed", payload={})
    assert webhooks.attempt(delivery) is False
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.last_status is None
    assert "Connection refused" in delivery.last_error or delivery.last_error
    assert webhooks.backoff(0) < webhooks.backoff(1) < webhooks.backoff(2)
