"""Teams: users who share a GPU quota."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Team(models.Model):
    """Users sharing a GPU quota; an approver may let requests within it pass on their own."""

    name = models.CharField(max_length=100, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="gpu_teams", blank=True)
    gpu_quota = models.PositiveIntegerField(
        default=0, help_text="Devices the team's live claims may ask for in total; 0 = no limit."
    )
    auto_approve = models.BooleanField(
        default=False, help_text="Approve requests within the quota without an approver."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
