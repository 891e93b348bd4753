"""The API's own upkeep, run by the beat (portal/settings.py, CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from claims.api import idempotency
from claims.api.models import IdempotencyRecord


@shared_task
def purge_expired_idempotency() -> int:
    """The responses kept for Idempotency-Key retries, once past API_IDEMPOTENCY_TTL (they
    count for nothing by then: a key sent again replaces its record)."""
    old = IdempotencyRecord.objects.filter(created__lt=idempotency.expired_before())
    deleted, _ = old.delete()
    return deleted
