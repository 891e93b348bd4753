"""Throttling per user (per address for anonymous requests), rates from REST_FRAMEWORK."""

from __future__ import annotations

from typing import Any

from rest_framework import throttling
from rest_framework.settings import api_settings


def rate_for(scope: str | None) -> str | None:
    # Read at request time (DRF reads it once, at import), so a changed setting applies.
    rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
    return rates.get(scope or "")


class UserThrottle(throttling.UserRateThrottle):
    def get_rate(self) -> str | None:
        return rate_for(self.scope)


class AnonThrottle(throttling.AnonRateThrottle):
    def get_rate(self) -> str | None:
        return rate_for(self.scope)
