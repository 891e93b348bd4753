"""Each user's own choices (language; what they are told)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Profile(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, models.CASCADE, related_name="portal_profile"
    )
    # "" = the browser's choice (Accept-Language); otherwise one of settings.LANGUAGES.
    language = models.CharField(max_length=10, blank=True)
    # Which emails the user gets (claims/notify/notifications.py maps each notice to one of these).
    notify_decisions = models.BooleanField(
        _("Decisions"),
        default=True,
        help_text=_("A request or an extension approved or rejected."),
    )
    notify_allocation = models.BooleanField(
        _("Allocation"), default=True, help_text=_("A claim got its devices.")
    )
    notify_failure = models.BooleanField(
        _("Failures"), default=True, help_text=_("A request failed in the cluster.")
    )
    notify_expiry = models.BooleanField(
        _("Expiry"), default=True, help_text=_("A claim is about to expire, or was reclaimed.")
    )
    notify_approvals = models.BooleanField(
        _("Decisions to make"),
        default=True,
        help_text=_("Approvers: someone asks for more time for a claim you may decide on."),
    )

    def __str__(self) -> str:
        return f"profile of {self.user}"
