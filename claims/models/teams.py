"""Teams: who shares a GPU quota, who may approve for it, and the rules that approve alone."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Subquery
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext


class Team(models.Model):
    """Users sharing GPU quotas (one per cluster and device class)."""

    name = models.CharField(max_length=100, unique=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        through="TeamMembership",
        related_name="gpu_teams",
        blank=True,
    )
    auto_approve = models.BooleanField(
        default=False,
        help_text="Approve every request of the team within its quotas without an approver "
        "(finer choices: approval rules).",
    )
    # Idle reclaim (claims.domain.idle_reclaim): a claim whose GPUs stay below the
    # threshold for the window is warned; after the grace period it is released.
    idle_reclaim = models.BooleanField(
        default=False,
        help_text="Warn the owners of idle claims, and release them after the grace period.",
    )
    idle_threshold = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A claim whose GPU activity (0-1) stays at or below this is idle.",
    )
    idle_window = models.DurationField(
        default=timedelta(hours=4),
        validators=[MinValueValidator(timedelta(seconds=1))],
        help_text="How long a claim must stay idle before its owner is warned.",
    )
    idle_grace = models.DurationField(
        default=timedelta(hours=24),
        validators=[MinValueValidator(timedelta(seconds=0))],
        help_text="How long after the warning the claim is released, unless it is used "
        "again or an extension is granted.",
    )

    kueue_local_queue = models.CharField(
        max_length=63,
        blank=True,
        validators=[
            RegexValidator(
                r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                gettext_lazy(
                    "A LocalQueue name: lower-case letters, digits, '-' and '.', starting "
                    "and ending with a letter or digit."
                ),
            )
        ],
        help_text="On clusters that run Kueue: the LocalQueue (in each of the team's "
        "namespaces) its jobs are submitted to. Empty: the one named by KUEUE_LOCAL_QUEUE.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", gettext_lazy("member")
        APPROVER = "approver", gettext_lazy("team approver")

    team = models.ForeignKey(Team, models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    joined = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "joined", "id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="unique_team_member"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.get_role_display()})"


class TeamQuota(models.Model):
    """What a team may hold on one cluster of one device class; no row means no limit."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="quotas")
    cluster = models.ForeignKey("claims.Cluster", models.CASCADE, related_name="team_quotas")
    device_class = models.CharField(max_length=253)
    max_devices = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Devices the team's live claims may hold at once; empty = no limit. "
        "An 'all devices' claim counts every device of the class on the cluster.",
    )
    max_lifetime = models.DurationField(
        null=True, blank=True, help_text="Longest a claim may live; empty = no cap."
    )
    default_lifetime = models.DurationField(
        null=True, blank=True, help_text="A claim's lifetime unless it asks for another."
    )

    class Meta:
        ordering = ["team", "cluster", "device_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "cluster", "device_class"], name="unique_team_quota"
            ),
        ]

    def __str__(self) -> str:
        limit = "no limit" if self.max_devices is None else f"{self.max_devices}"
        return f"{self.team}: {self.device_class} on {self.cluster} ({limit})"


class ApprovalRule(models.Model):
    """A request that matches an enabled rule (and fits its team's quota) is approved
    without an approver; the first match in `position` order decides."""

    class AppliesTo(models.TextChoices):
        CLAIM = "claim", gettext_lazy("claim requests")
        NAMESPACE = "namespace", gettext_lazy("namespace requests")
        EXTENSION = "extension", gettext_lazy("lifetime extensions")

    name = models.SlugField(max_length=100, unique=True, help_text="Named in the audit trail.")
    applies_to = models.CharField(max_length=20, choices=AppliesTo.choices, default=AppliesTo.CLAIM)
    team = models.ForeignKey(
        Team, models.CASCADE, null=True, blank=True, help_text="Empty: every team."
    )
    cluster = models.ForeignKey(
        "claims.Cluster", models.CASCADE, null=True, blank=True, help_text="Empty: every cluster."
    )
    device_class = models.CharField(
        max_length=253, blank=True, help_text="Empty: every device class."
    )
    max_devices = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many devices; empty: any number."
    )
    max_lifetime = models.DurationField(
        null=True,
        blank=True,
        help_text="Extensions: the claim's whole lifetime stays within this; empty: any.",
    )
    enabled = models.BooleanField(default=True)
    position = models.PositiveIntegerField(default=100)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name

    def describe(self) -> str:
        parts: list[Any] = [self.get_applies_to_display()]
        parts.append(
            _("of team %(team)s") % {"team": self.team} if self.team_id else _("of every team")
        )
        if self.cluster_id:
            parts.append(_("on %(cluster)s") % {"cluster": self.cluster})
        if self.device_class:
            parts.append(_("of class %(class)s") % {"class": self.device_class})
        if self.max_devices is not None:
            parts.append(
                ngettext(
                    "with at most %(n)d device", "with at most %(n)d devices", self.max_devices
                )
                % {"n": self.max_devices}
            )
        if self.max_lifetime is not None:
            lifetime = lifetime_words(self.max_lifetime)
            parts.append(_("living at most %(lifetime)s") % {"lifetime": lifetime})
        return " ".join(str(part) for part in parts)


def first_team_id(user_id: Any) -> Subquery:
    """The team a user joined first (the one charged for their claims), as a subquery."""
    memberships = TeamMembership.objects.filter(user_id=user_id).order_by("joined", "id")
    return Subquery(memberships.values("team_id")[:1])


def first_teams_of_members(team_ids: Iterable[int]) -> dict[int, int]:
    """The members of these teams whose first team (the one they joined first) is one of
    them, and that team: a user in several teams is charged to, and decided for by, it."""
    team_ids = set(team_ids)
    members = TeamMembership.objects.filter(team_id__in=team_ids).values("user_id")
    rows = TeamMembership.objects.filter(user_id__in=members).order_by("joined", "id")
    firsts: dict[int, int] = {}
    for user_id, team_id in rows.values_list("user_id", "team_id"):
        firsts.setdefault(user_id, team_id)
    return {user_id: team_id for user_id, team_id in firsts.items() if team_id in team_ids}


def first_team_members(team_ids: list[int]) -> list[int]:
    return list(first_teams_of_members(team_ids))


APPROVED_TEAMS_CACHE = "_portal_approved_teams"


def approved_team_ids(user: Any) -> list[int]:
    """Ids of the teams the user is a team approver of: looked up once per user object
    (Django loads it afresh for each request), as claims.read.selectors.user_is_approver."""
    if not getattr(user, "is_authenticated", False):
        return []
    if not hasattr(user, APPROVED_TEAMS_CACHE):
        mine = TeamMembership.objects.filter(user=user, role=TeamMembership.Role.APPROVER)
        setattr(user, APPROVED_TEAMS_CACHE, list(mine.values_list("team_id", flat=True)))
    return list(getattr(user, APPROVED_TEAMS_CACHE))


def lifetime_words(value: timedelta | None) -> str:
    """ "7 days", "1 day 12 hours", 90 minutes as "1 hour 30 minutes"; "" for None."""
    if value is None:
        return ""
    minutes = int(value.total_seconds() // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [
        ngettext("%(n)d day", "%(n)d days", days) % {"n": days} if days else "",
        ngettext("%(n)d hour", "%(n)d hours", hours) % {"n": hours} if hours else "",
        ngettext("%(n)d minute", "%(n)d minutes", minutes) % {"n": minutes} if minutes else "",
    ]
    return " ".join(part for part in parts if part) or _("0 minutes")
