"""Extensions of a claim's lifetime: asked by its owner, decided by the rules or an approver."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from claims.models.core import ClaimRequest


class ClaimExtension(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    claim = models.ForeignKey(ClaimRequest, models.CASCADE, related_name="extensions")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+"
    )
    extra = models.DurationField(help_text="How much longer the claim may live.")
    reason = models.TextField(blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # Why it was decided so: the rule, or the approver's reason.
    decision = models.TextField(blank=True)
    # The claim's end before and (once approved) after the extension.
    expires_before = models.DateTimeField(null=True, blank=True)
    expires_after = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["state", "created"], name="extension_state_oldest")]
        constraints = [
            # One open question per claim: a second ask waits for the first to be decided.
            models.UniqueConstraint(
                fields=["claim"], condition=models.Q(state="pending"), name="one_pending_extension"
            )
        ]

    def __str__(self) -> str:
        return f"{self.extra} more for {self.claim_id} ({self.state})"


class IdleWarning(models.Model):
    """A claim found idle by its team's policy (claims.domain.idle_reclaim): its owner was
    told the figures and the deadline; it ends reclaimed, or cleared when the claim was used
    again, extended, released, or its metrics went missing."""

    class State(models.TextChoices):
        OPEN = "open", "open"
        RECLAIMED = "reclaimed", "reclaimed"
        ACTIVE = "active", "used again"
        EXTENDED = "extended", "extended"
        NO_DATA = "no_data", "no data"
        ENDED = "ended", "claim ended"

    claim = models.ForeignKey(ClaimRequest, models.CASCADE, related_name="idle_warnings")
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    created = models.DateTimeField(default=timezone.now)
    deadline = models.DateTimeField()
    idle_since = models.DateTimeField()
    # The figures the owner was told: the highest activity since idle_since, the policy.
    peak_activity = models.FloatField(null=True, blank=True)
    memory_used_mib = models.FloatField(null=True, blank=True)
    threshold = models.FloatField()
    window = models.DurationField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.TextField(blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["claim"], condition=models.Q(state="open"), name="one_open_idle_warning"
            )
        ]

    def __str__(self) -> str:
        return f"idle warning of {self.claim_id} ({self.state})"
