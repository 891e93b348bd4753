"""The API's own settings: from django.conf.settings, else the defaults in portal.api_settings."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from portal import api_settings


def api_setting(name: str) -> Any:
    return getattr(settings, name, getattr(api_settings, name))
