"""The audit trail: who did what, to what, when, from where (append-only, see 0017)."""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone
from django.utils.translation import pgettext_lazy


def _user_reference() -> models.ForeignKey:
    """A user the row names, kept as it was: deleting the user touches no audit row (the
    trigger would refuse the UPDATE of SET_NULL and the DELETE of CASCADE), so no database
    constraint, and a join to a deleted user finds nothing."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )


class AuditEvent(models.Model):
    """One row per action: a state change, a login, a token, a kubeconfig, an admin's edit."""

    class Kind(models.TextChoices):
        NAMESPACE_REQUEST = "namespace_request", pgettext_lazy("audit", "namespace request")
        CLAIM_REQUEST = "claim_request", pgettext_lazy("audit", "claim request")
        VERIFICATION_RUN = "verification_run", pgettext_lazy("audit", "verification run")
        USER = "user", pgettext_lazy("audit", "user")
        API_TOKEN = "api_token", pgettext_lazy("audit", "API token")
        CLUSTER = "cluster", pgettext_lazy("audit", "cluster")
        TEAM = "team", pgettext_lazy("audit", "team")
        TEAM_MEMBERSHIP = "team_membership", pgettext_lazy("audit", "team membership")
        TEAM_QUOTA = "team_quota", pgettext_lazy("audit", "team quota")
        APPROVAL_RULE = "approval_rule", pgettext_lazy("audit", "approval rule")
        TEAM_WEBHOOK = "team_webhook", pgettext_lazy("audit", "team webhook")
        WORKLOAD = "workload", pgettext_lazy("audit", "workload")
        WORKLOAD_PROFILE = "workload_profile", pgettext_lazy("audit", "workload profile")

    class Action(models.TextChoices):
        STATE_CHANGE = "state_change", pgettext_lazy("audit", "state change")
        NOTE = "note", pgettext_lazy("audit", "note")
        LOGIN = "login", pgettext_lazy("audit", "login")
        LOGIN_FAILED = "login_failed", pgettext_lazy("audit", "login failed")
        LOCKED_OUT = "locked_out", pgettext_lazy("audit", "locked out")
        LOGOUT = "logout", pgettext_lazy("audit", "logout")
        TOKEN_CREATED = "token_created", pgettext_lazy("audit", "token created")
        TOKEN_REVOKED = "token_revoked", pgettext_lazy("audit", "token revoked")
        KUBECONFIG_ISSUED = "kubeconfig_issued", pgettext_lazy("audit", "kubeconfig issued")
        EXTENSION_ASKED = "extension_asked", pgettext_lazy("audit", "extension asked")
        CREATED = "created", pgettext_lazy("audit", "created")
        CHANGED = "changed", pgettext_lazy("audit", "changed")
        DELETED = "deleted", pgettext_lazy("audit", "deleted")
        QUEUE_MOVED = "queue_moved", pgettext_lazy("audit", "moved in the queue")

    class Channel(models.TextChoices):
        WEB = "web", pgettext_lazy("audit", "web")
        API = "api", pgettext_lazy("audit", "API")
        ADMIN = "admin", pgettext_lazy("audit", "admin")
        SYSTEM = "system", pgettext_lazy("audit", "system")

    action = models.CharField(max_length=30, choices=Action.choices, default=Action.STATE_CHANGE)
    actor = _user_reference()
    # The actor's username when it happened: the row still says who after the user is gone.
    actor_username = models.CharField(max_length=150, blank=True)
    object_kind = models.CharField(max_length=30, choices=Kind.choices)
    object_id = models.PositiveBigIntegerField(null=True, blank=True)
    object_name = models.CharField(max_length=253, blank=True)
    # Owner of the object, so a user's event list is one indexed query.
    owner = _user_reference()
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    message = models.TextField(blank=True)
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.SYSTEM)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    before = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    # SHA-256 of the applied manifest as canonical JSON (claims.domain.audit.manifest_sha256).
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    allocation = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    # A verification run's verdict when it ended: passed, what each CUDA sample said.
    result = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created", "id"]
        indexes = [
            models.Index(fields=["object_kind", "object_id"]),
            models.Index(fields=["created", "id"], name="event_oldest"),
            models.Index(fields=["owner", "created", "id"], name="event_owner_oldest"),
            models.Index(fields=["action", "created"], name="event_action_oldest"),
            models.Index(fields=["actor_username", "created"], name="event_actor_oldest"),
            models.Index(fields=["object_name"], name="event_object_name"),
        ]

    def __str__(self) -> str:
        if self.action == self.Action.STATE_CHANGE:
            return f"{self.object_kind} {self.object_id}: {self.from_state} → {self.to_state}"
        return f"{self.action} {self.object_kind} {self.object_name}".strip()

    @property
    def actor_name(self) -> str:
        """Who: the user; "anonymous" for a failed login; "system" for the portal's own work
        (the cluster's news, a rule's decision)."""
        if self.actor_username:
            return self.actor_username
        anonymous = self.action in (self.Action.LOGIN_FAILED, self.Action.LOCKED_OUT)
        return "anonymous" if anonymous else "system"
