"""Lockout after repeated failed logins or API tokens, kept by django-axes in the database.

django-axes counts failed logins (the site's and the admin's) per client address and refuses
that address for the cool-off once the limit is reached. API tokens go through the same count:
a bad token is reported to axes as a failed login, and a locked-out address gets 429 for any
token, valid or not, so the answer tells a guesser nothing.
"""

from __future__ import annotations

import time
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.response import Response

from claims.policy.client_address import client_ip

# Shown as the "username" of token failures in the admin's access attempts (no user can
# have it: parentheses and spaces are not allowed in usernames).
TOKEN_CREDENTIALS = {"username": "(api token)"}


def cool_off_seconds(request: HttpRequest) -> int:
    cool_off = get_cool_off(request)
    return int(cool_off.total_seconds()) if cool_off else 0


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any = None
) -> HttpResponse:
    """The page that says why a login was refused; API answers are already a 429."""
    if isinstance(original_response, Response) and original_response.status_code == 429:
        return original_response
    minutes = max(1, cool_off_seconds(request) // 60)
    context = {"minutes": minutes, "failure_limit": settings.AXES_FAILURE_LIMIT}
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(cool_off_seconds(request))
    return response


class LockoutBackend(AxesStandaloneBackend):
    """axes' check on every login; one without a request (the test client, a script) comes
    from no address and is not counted: every login page and the admin pass the request."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is not None:
            super().authenticate(request, *args, **kwargs)


# Every API request asks whether its address is locked out (a SUM over axes' attempts). An
# answer of "not locked" is kept in the process this long; any failure counted in the process
# forgets it at once, so a lockout holds here at once and in another process within this.
NOT_LOCKED_SECONDS = 1.0
NOT_LOCKED_KEPT = 10_000  # addresses; past that the memory starts again
_not_locked_until: dict[str, float] = {}


def is_locked(request: HttpRequest) -> bool:
    address, now = client_ip(request), time.monotonic()
    if _not_locked_until.get(address, 0.0) > now:
        return False
    locked = bool(AxesProxyHandler.is_locked(request))
    if not locked:
        if len(_not_locked_until) >= NOT_LOCKED_KEPT:
            _not_locked_until.clear()
        _not_locked_until[address] = now + NOT_LOCKED_SECONDS
    return locked


@receiver(user_login_failed)
def forget_not_locked(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """A failed login or token from an address: ask axes again at its next request."""
    if request is not None:
        _not_locked_until.pop(client_ip(request), None)


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token check, counted by django-axes like a login."""

    def authenticate(self, request: Request) -> Any:
        if self.presents_token(request) and is_locked(request._request):
            raise Throttled(wait=cool_off_seconds(request._request))
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            self.count_failure(request)
            raise

    def _cleanup_token(self, auth_token: Any) -> bool:
        """Whether the token presented has expired (then it is deleted). knox also reads every
        other token of the user on every request to delete its expired ones, a query per API
        call: the beat's claims.worker.tasks.purge_expired_tokens deletes those instead."""
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False

    def presents_token(self, request: Request) -> bool:
        words = request.headers.get("Authorization", "").split()
        return bool(words) and words[0].lower() == self.authenticate_header(request).lower()

    def count_failure(self, request: Request) -> None:
        django_request = request._request
        user_login_failed.send(__name__, credentials=TOKEN_CREDENTIALS, request=django_request)
        if getattr(django_request, "axes_locked_out", False):
            raise Throttled(wait=cool_off_seconds(django_request))


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI schema names the same knox token scheme (it does not match subclasses)."""

    target_class = "portal.lockout.TokenAuthentication"
