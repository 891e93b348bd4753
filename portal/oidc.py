"""Single sign-on with OpenID Connect (mozilla-django-oidc), beside the local accounts.

The authorization-code flow: /oidc/authenticate/ sends the browser to the provider, which
sends it back to /oidc/callback/; the backend exchanges the code, checks the ID token (its
signature against the provider's JWKS, and its issuer and audience, which the library leaves
alone) and reads the user's claims from the userinfo endpoint.

A user is found or created by OIDC_USERNAME_CLAIM: that value is their portal username and so
their cluster identity (claims/access.py binds "<ACCESS_USER_PREFIX><username>"). Each sign-in
sets their roles from the groups claim: an approver group puts them in the portal's approvers
group, an admin group makes them staff and superuser, neither makes a data scientist. The
provider decides for the accounts that sign in through it; a local account of the same
username becomes that SSO account.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth.models import AbstractUser, Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path, reverse
from mozilla_django_oidc import views
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from claims.selectors import APPROVERS_GROUP

log = logging.getLogger(__name__)


def enabled() -> bool:
    return bool(settings.OIDC_RP_CLIENT_ID)


def roles_from(claims: dict[str, Any]) -> tuple[bool, bool]:
    """(approver, admin) from the groups claim: a list of names, or one name."""
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    names = {groups} if isinstance(groups, str) else {str(group) for group in groups}
    admin = bool(names & set(settings.OIDC_ADMIN_GROUPS))
    approver = admin or bool(names & set(settings.OIDC_APPROVER_GROUPS))
    return approver, admin


def username_from(claims: dict[str, Any]) -> str:
    """The username claim's value; refused unless it is a valid Django username."""
    value = claims.get(settings.OIDC_USERNAME_CLAIM)
    if not isinstance(value, str) or not value or len(value) > 150:
        raise SuspiciousOperation(f"no usable {settings.OIDC_USERNAME_CLAIM} claim")
    try:
        UnicodeUsernameValidator()(value)
    except ValidationError as e:
        raise SuspiciousOperation(f"{settings.OIDC_USERNAME_CLAIM} claim {value!r}") from e
    return value


class PortalOIDCBackend(OIDCAuthenticationBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if enabled():
            super().__init__(*args, **kwargs)
        else:  # never asked to authenticate, but still loads users of old SSO sessions
            from django.contrib.auth import get_user_model

            self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> AbstractUser | None:
        callback = reverse(settings.OIDC_AUTHENTICATION_CALLBACK_URL)
        if not enabled() or request is None or request.path != callback:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, jwt.PyJWTError, requests.RequestException) as e:
            # A forged or misdirected token, or a provider that does not answer: no login.
            log.warning("single sign-on refused: %s: %s", type(e).__name__, e)
            return None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation(f"ID token for {audiences}, not this portal")
        issuer = settings.OIDC_OP_ISSUER
        if issuer and payload.get("iss") != issuer:
            raise SuspiciousOperation(f"ID token from {payload.get('iss')!r}, not {issuer!r}")
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        username_from(claims)
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=username_from(claims))

    def create_user(self, claims: dict[str, Any]) -> AbstractUser:
        with transaction.atomic():
            user = self.UserModel.objects.create_user(username_from(claims))
            return self.update_user(user, claims)

    def update_user(self, user: AbstractUser, claims: dict[str, Any]) -> AbstractUser:
        approver, admin = roles_from(claims)
        user.email = str(claims.get("email") or user.email)
        user.first_name = str(claims.get("given_name") or user.first_name)[:150]
        user.last_name = str(claims.get("family_name") or user.last_name)[:150]
        user.is_staff = user.is_superuser = admin
        user.save()
        group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
        if approver:
            user.groups.add(group)
        else:
            user.groups.remove(group)
        return user


class AuthenticateView(views.OIDCAuthenticationRequestView):
    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("single sign-on is not configured")
        return super().get(request)


class CallbackView(views.OIDCAuthenticationCallbackView):
    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)
        except SuspiciousOperation as e:  # a state this browser never started (a replay)
            log.warning("single sign-on refused: %s", e)
            return self.login_failure()


urlpatterns = [
    path("authenticate/", AuthenticateView.as_view(), name="oidc_authentication_init"),
    path("callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
]


def context(request: HttpRequest) -> dict[str, Any]:
    """The login page's sign-in button (a template context processor)."""
    if not enabled():
        return {"sso": None}
    return {"sso": {"name": settings.OIDC_PROVIDER_NAME, "failed": "sso" in request.GET}}
