"""Throttling per user (per address for anonymous requests), rates from REST_FRAMEWORK."""

from __future__ import annotations

from rest_framework import throttling
from rest_framework.settings import api_settings


class _RateFromSettings:
    scope: str

    def get_rate(self) -> str | None:
        # Read at request time (not at import, as DRF does), so a changed setting applies.
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]


class UserThrottle(_RateFromSettings, throttling.UserRateThrottle):
    pass


class AnonThrottle(_RateFromSettings, throttling.AnonRateThrottle):
    pass
