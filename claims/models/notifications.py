"""A team's webhook and the log of what was delivered to it."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from claims.models.teams import Team


class TeamWebhook(models.Model):
    """Each notice about the team's requests is POSTed here as JSON, signed with the secret."""

    team = models.OneToOneField(Team, models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    secret = models.CharField(
        max_length=200, help_text="Signs each body: X-Portal-Signature: sha256=HMAC(secret, body)."
    )
    active = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"webhook of {self.team}"


class WebhookDelivery(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed"

    webhook = models.ForeignKey(TeamWebhook, models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["webhook", "-created"], name="delivery_newest")]

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id} ({self.state})"
