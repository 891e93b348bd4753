"""Single sign-on with OpenID Connect (mozilla-django-oidc), beside the local accounts.

The authorization-code flow: /oidc/authenticate/ sends the browser to the provider, which
sends it back to /oidc/callback/; the backend exchanges the code, checks the ID token (its
signature against the provider's JWKS, and its issuer and audience, which the library leaves
alone) and reads the user's claims from the userinfo endpoint.

Who may sign in: with OIDC_USER_GROUPS set, only members of those groups or of the approver
and admin groups; when the username claim is `email`, only a verified address (if the provider
says). A refused person lands on the login page with a notice saying why.

A user is found by OIDC_USERNAME_CLAIM alone (never by email, mozilla-django-oidc's default)
or created: that value is their portal username and so their cluster identity
(claims/domain/access.py binds "<ACCESS_USER_PREFIX><username>"). Accounts the provider may sign in
are in the SSO_GROUP group: those it made, and local ones an administrator put there or
OIDC_LINK_LOCAL_ACCOUNTS linked at their first sign-in; any other local account of that name
is refused, never taken over. Each sign-in sets their roles from the groups claim: an approver
group puts them in the portal's approvers group, an admin group makes them staff and
superuser, neither makes a data scientist.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import AbstractUser, Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.translation import gettext as _
from mozilla_django_oidc import views
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from claims.read.selectors import APPROVERS_GROUP

log = logging.getLogger(__name__)

# The accounts single sign-on may sign in (the Django admin shows them, and can add one).
SSO_GROUP = "single sign-on"


class SignInRefused(Exception):
    """The provider vouched for the person, and the portal's policy says no (shown to them)."""

    def __init__(self, reason: str, notice: str) -> None:
        super().__init__(reason)
        self.notice = notice


def enabled() -> bool:
    return bool(settings.OIDC_RP_CLIENT_ID)


def groups_from(claims: dict[str, Any]) -> set[str]:
    """The groups claim: a list of names, or one name."""
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    return {groups} if isinstance(groups, str) else {str(group) for group in groups}


def roles_from(claims: dict[str, Any]) -> tuple[bool, bool]:
    """(approver, admin) from the groups claim."""
    names = groups_from(claims)
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


def check_allowed(claims: dict[str, Any]) -> None:
    """Refuse someone outside OIDC_USER_GROUPS (when set) and the approver and admin groups,
    and, when the email address names the account, an address the provider has not verified."""
    provider = settings.OIDC_PROVIDER_NAME
    allowed = {*settings.OIDC_USER_GROUPS, *settings.OIDC_APPROVER_GROUPS}
    allowed |= set(settings.OIDC_ADMIN_GROUPS)
    if settings.OIDC_USER_GROUPS and not groups_from(claims) & allowed:
        raise SignInRefused(
            f"{username_from(claims)!r} is in none of the allowed groups",
            _(
                "Your %(provider)s account is in no group that may use this portal. Ask an "
                "administrator to add you to one."
            )
            % {"provider": provider},
        )
    verified = claims.get("email_verified", True)
    if settings.OIDC_USERNAME_CLAIM == "email" and str(verified).lower() != "true":
        raise SignInRefused(
            f"the email address {username_from(claims)!r} is not verified",
            _(
                "%(provider)s has not verified your email address, which names your account "
                "here. Verify it there, then sign in again."
            )
            % {"provider": provider},
        )


def signs_in_by_sso(user: AbstractUser) -> bool:
    return user.groups.filter(name=SSO_GROUP).exists()


def refuse_local_account(user: AbstractUser) -> None:
    """A local account of the same name is not the provider's to take, unless linking is on."""
    if settings.OIDC_LINK_LOCAL_ACCOUNTS or signs_in_by_sso(user):
        return
    raise SignInRefused(
        f"{user.get_username()!r} is a local account (OIDC_LINK_LOCAL_ACCOUNTS is off)",
        _(
            "The account %(username)s here is a local one, not linked to %(provider)s. Sign in "
            "with its password, or ask an administrator to link it."
        )
        % {"username": user.get_username(), "provider": settings.OIDC_PROVIDER_NAME},
    )


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
        except SignInRefused as e:
            log.warning("single sign-on refused: %s", e)
            messages.error(request, e.notice, fail_silently=True)
            return None
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

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        """The provider's key that verifies the token. `kid` is optional in a JWKS and a JWS
        header: match on it when both carry one, else try each key of the token's alg."""
        keys = requests.get(
            settings.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", None),
            proxies=self.get_settings("OIDC_PROXY", None),
        )
        keys.raise_for_status()
        header = jwt.get_unverified_header(token)
        candidates = [
            key
            for key in keys.json().get("keys", [])
            if key.get("alg", header.get("alg")) == header.get("alg")
            and ("kid" not in key or "kid" not in header or key["kid"] == header["kid"])
        ]
        for key in candidates:
            try:
                self._verify_jws(token, jwt.PyJWK(key))
            except (SuspiciousOperation, jwt.PyJWTError):
                continue
            return jwt.PyJWK(key)
        log.error(
            "single sign-on: none of the %d keys at OIDC_OP_JWKS_ENDPOINT verifies the ID token "
            "(kid %r); check OIDC_OP_JWKS_ENDPOINT or set OIDC_RP_IDP_SIGN_KEY",
            len(candidates),
            header.get("kid"),
        )
        raise SuspiciousOperation("Could not find a valid JWKS.")

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        username_from(claims)
        check_allowed(claims)
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        # By username only: the library's default (any account with the same email) would
        # hand the provider accounts it never made.
        users = self.UserModel.objects.filter(username=username_from(claims))
        for user in users:
            refuse_local_account(user)
        return users

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
        sso, _created = Group.objects.get_or_create(name=SSO_GROUP)
        if not user.groups.filter(pk=sso.pk).exists():
            log.info("account %r now signs in by single sign-on", user.get_username())
            user.groups.add(sso)
        approvers, _created = Group.objects.get_or_create(name=APPROVERS_GROUP)
        if approver:
            user.groups.add(approvers)
        else:
            user.groups.remove(approvers)
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
