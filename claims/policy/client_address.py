"""The client's address as the portal counts it: the API throttles, the login lockout and
the audit trail agree (TRUSTED_PROXY_COUNT decides how many proxies to look through)."""

from __future__ import annotations

from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle


def client_ip(request: HttpRequest) -> str:
    return BaseThrottle().get_ident(request) or ""  # type: ignore[arg-type]
