"""The Idempotency-Key header: a POST retried with the same key gets the first response again.

The record is written in the same transaction as the work it guards, so either both exist
or neither does; a concurrent retry waits on the unique (user, key) index until the first
request commits, then replays its response. Records older than API_IDEMPOTENCY_TTL no
longer count (a key may be used again) and the beat's claims.api.tasks.purge_expired_idempotency
deletes them, rather than a DELETE on every POST.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import IdempotencyKeyReused
from claims.api.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
KEY_PATTERN = re.compile(rf"[!-~]{{1,{MAX_KEY_LENGTH}}}")
REPLAYED_HEADER = "Idempotent-Replayed"

View = Callable[..., Response]


def idempotent(view_method: View) -> View:
    """Decorate a POST handler of an APIView."""

    @functools.wraps(view_method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        user: Any = request.user
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(view, request, *args, **kwargs)
        key = _checked_key(key)
        fingerprint = _fingerprint(request)
        with transaction.atomic():
            previous = _reserve(user, key, fingerprint)
            if previous is not None:
                return _replay(previous, fingerprint)
            response = view_method(view, request, *args, **kwargs)
            IdempotencyRecord.objects.filter(user=user, key=key).update(
                status_code=response.status_code, response_body=response.data
            )
        return response

    return wrapper


def _checked_key(key: str) -> str:
    if not KEY_PATTERN.fullmatch(key):
        raise ValidationError(
            {HEADER: [f"Send 1 to {MAX_KEY_LENGTH} visible ASCII characters, e.g. a UUID."]}
        )
    return key


def _fingerprint(request: Request) -> str:
    data = request.data
    body = dict(data.lists()) if hasattr(data, "lists") else data
    canonical = json.dumps([request.method, request.path, body], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def expired_before() -> datetime:
    return timezone.now() - settings.API_IDEMPOTENCY_TTL


def _reserve(user: Any, key: str, fingerprint: str) -> IdempotencyRecord | None:
    """Claim the key for this request, or return the record of the request that had it.

    A record past its time is replaced (the purge had not come round to it yet)."""
    for _attempt in range(2):
        try:
            with transaction.atomic():
                IdempotencyRecord.objects.create(
                    user=user, key=key, fingerprint=fingerprint, status_code=0
                )
            return None
        except IntegrityError:
            previous = IdempotencyRecord.objects.get(user=user, key=key)
            if previous.created >= expired_before():
                return previous
            IdempotencyRecord.objects.filter(pk=previous.pk).delete()
    # Another request replaced the expired record at the same moment: its answer is ours.
    return IdempotencyRecord.objects.get(user=user, key=key)


def _replay(record: IdempotencyRecord, fingerprint: str) -> Response:
    if record.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    return Response(
        record.response_body, status=record.status_code, headers={REPLAYED_HEADER: "true"}
    )
