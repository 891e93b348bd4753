"""The language of a signed-in user's pages: the one they chose (Profile.language).

Django's LocaleMiddleware has already picked the language cookie or the browser's
Accept-Language; a choice the user saved in their profile wins over both, on every device
they sign in from. The choice is read at login (or once in a session from before) and kept
in the session, so a page costs no query for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from claims.models import Profile

SESSION_KEY = "portal_language"


def user_language_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        chosen = chosen_language(request)
        if chosen:
            translation.activate(chosen)
            request.LANGUAGE_CODE = chosen
        return get_response(request)

    return middleware


def chosen_language(request: HttpRequest) -> str:
    """The signed-in user's saved language, "" when none (or not signed in)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return ""
    if SESSION_KEY not in request.session:
        request.session[SESSION_KEY] = saved_language(user.pk)
    return supported(str(request.session[SESSION_KEY]))


def remember_at_login(
    sender: Any, *, request: HttpRequest | None, user: Any, **kwargs: Any
) -> None:
    """Receiver of user_logged_in (connected in ClaimsConfig.ready)."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = saved_language(user.pk)


def saved_language(user_id: int) -> str:
    profile = Profile.objects.filter(user_id=user_id).only("language").first()
    return profile.language if profile else ""


def supported(code: str) -> str:
    """The code if the portal speaks it (a setting may have dropped one), else ""."""
    return code if code in dict(settings.LANGUAGES) else ""


def remember(request: HttpRequest, code: str) -> None:
    """After the switcher saved a choice: this session uses it from the next request."""
    request.session[SESSION_KEY] = code
