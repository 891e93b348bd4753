"""What the API keeps of its own: the responses of POSTs sent with an Idempotency-Key."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class IdempotencyRecord(models.Model):
    """The first response to (user, key), replayed when a script retries the same POST."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # sha256 of method, path and the parsed body: the same key with another body is refused.
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response_body = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
