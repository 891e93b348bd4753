"""A past moment in words, the one wording pages, pickers and messages share."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext as _


def ago(moment: datetime, now: datetime | None = None) -> str:
    """ "just now" under a minute (never "0 minutes ago"), else Django's timesince."""
    if (now or timezone.now()) - moment < timedelta(minutes=1):
        return _("just now")
    return _("%(time)s ago") % {"time": timesince(moment, now)}
