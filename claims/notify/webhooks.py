"""A team's webhook: each notice POSTed as JSON, signed, retried with back-off, logged.

The receiver checks `X-Portal-Signature: sha256=<hex>`, the HMAC-SHA256 of the raw body
with the team's secret (as GitHub's webhooks do). The body carries the delivery's id, so a
receiver that sees one twice (a retry after a lost answer) can drop it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

import requests
from celery import current_app as app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from claims.models import TeamWebhook, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Portal-Signature"
DS = WebhookDelivery.State
# Answers worth trying again: the receiver may be fine later. Any other 4xx will not change.
RETRIED_CLIENT_ERRORS = (408, 425, 429)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_of(delivery: WebhookDelivery) -> bytes:
    payload = {"delivery": delivery.pk, **delivery.payload}
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def queue(webhook: TeamWebhook, event: str, payload: dict[str, Any]) -> WebhookDelivery:
    """Log a delivery and send it once the transaction commits."""
    delivery = WebhookDelivery.objects.create(webhook=webhook, event=event, payload=payload)
    transaction.on_commit(
        lambda: app.send_task(
            "claims.worker.tasks.deliver_webhook",
            args=(delivery.pk,),
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        ),
        robust=True,
    )
    return delivery


def attempt(delivery: WebhookDelivery) -> bool | None:
    """POST once and log it: True delivered, False worth retrying, None refused for good."""
    body = body_of(delivery)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "gpu-portal-webhook",
        "X-Portal-Event": delivery.event,
        "X-Portal-Delivery": str(delivery.pk),
        SIGNATURE_HEADER: sign(delivery.webhook.secret, body),
    }
    try:
        response = requests.post(
            delivery.webhook.url,
            data=body,
            headers=headers,
            timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
            allow_redirects=False,
        )
    except requests.RequestException as failure:
        _logged(delivery, status=None, error=str(failure)[:500])
        return False
    if 200 <= response.status_code < 300:
        _logged(delivery, status=response.status_code, error="", state=DS.DELIVERED)
        return True
    error = f"HTTP {response.status_code}: {response.text[:300]}"
    _logged(delivery, status=response.status_code, error=error)
    retried = response.status_code >= 500 or response.status_code in RETRIED_CLIENT_ERRORS
    return False if retried else None


def give_up(delivery: WebhookDelivery) -> None:
    log.warning("webhook delivery %s given up: %s", delivery.pk, delivery.last_error)
    WebhookDelivery.objects.filter(pk=delivery.pk, state=DS.PENDING).update(state=DS.FAILED)


def backoff(retries: int) -> float:
    return float(settings.WEBHOOK_RETRY_SECONDS * 2**retries)


def _logged(delivery: WebhookDelivery, *, status: int | None, error: str, state: str = "") -> None:
    fields: dict[str, Any] = {"last_status": status, "last_error": error}
    if state:
        fields |= {
            "state": state,
            "delivered_at": timezone.now() if state == DS.DELIVERED else None,
        }
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=delivery.attempts + 1, **fields)
    delivery.attempts += 1
    for field, value in fields.items():
        setattr(delivery, field, value)
