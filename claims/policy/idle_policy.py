"""The bounds of a team's idle reclaim policy (Team.idle_*), in one place: the API's input
ranges come from here, and claims.domain.teams checks every change against them (the team
page's form, the API, the Django admin's through the model's validators)."""

from __future__ import annotations

from datetime import timedelta

from django.utils.translation import gettext as _

THRESHOLD_MIN, THRESHOLD_MAX = 0.0, 1.0
WINDOW_MIN = timedelta(seconds=1)
GRACE_MIN = timedelta(0)
LONGEST = timedelta(days=365)
FIELDS = ("idle_reclaim", "idle_threshold", "idle_window", "idle_grace")


def problems(
    threshold: float | None, window: timedelta | None, grace: timedelta | None
) -> dict[str, str]:
    """Field -> what is wrong, for the fields given (None: not given)."""
    found = {}
    if threshold is not None and not THRESHOLD_MIN <= threshold <= THRESHOLD_MAX:
        found["idle_threshold"] = _("Give a GPU activity from 0 to 1, e.g. 0.05.")
    if window is not None and not WINDOW_MIN <= window <= LONGEST:
        found["idle_window"] = _("Give a window longer than 0 and at most 365 days.")
    if grace is not None and not GRACE_MIN <= grace <= LONGEST:
        found["idle_grace"] = _("Give a grace period from 0 to 365 days.")
    return found
