"""The audit trail: who changed what, when."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """One row per state change (who, what, from, to, why)."""

    class Kind(models.TextChoices):
        NAMESPACE_REQUEST = "namespace_request", "namespace request"
        CLAIM_REQUEST = "claim_request", "claim request"
        VERIFICATION_RUN = "verification_run", "verification run"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    object_kind = models.CharField(max_length=30, choices=Kind.choices)
    object_id = models.PositiveBigIntegerField()
    object_name = models.CharField(max_length=253, blank=True)
    # Owner of the object, so a user's event list is one indexed query.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.CASCADE, null=True, blank=True, related_name="+"
    )
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    message = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created", "id"]
        indexes = [
            models.Index(fields=["object_kind", "object_id"]),
            models.Index(fields=["created", "id"], name="event_oldest"),
            models.Index(fields=["owner", "created", "id"], name="event_owner_oldest"),
        ]

    def __str__(self) -> str:
        return f"{self.object_kind} {self.object_id}: {self.from_state} → {self.to_state}"

    @property
    def actor_name(self) -> str:
        return self.actor.get_username() if self.actor else "system"
