"""Each user's own choices (language; what they are told)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Profile(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, models.CASCADE, related_name="portal_profile"
    )
    # "" = the browser's choice (Accept-Language); otherwise one of settings.LANGUAGES.
    language = models.CharField(max_length=10, blank=True)

    def __str__(self) -> str:
        return f"profile of {self.user}"
