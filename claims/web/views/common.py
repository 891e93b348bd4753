"""Helpers shared by the page views: live partials and one-time form tokens."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required as django_login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling
from django_htmx.middleware import HtmxDetails

SUBMITTED_KEY = "submitted_forms"
SUBMITTED_KEEP = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


View = Callable[..., HttpResponse]


def login_required(view: View) -> View:
    """Django's login_required, but an htmx request (a poll after the session ended) makes
    the whole browser go to the login page instead of swapping the login form into a region.
    """
    plain = django_login_required(view)

    @wraps(view)
    def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.htmx and not request.user.is_authenticated:
            back_to = urlsplit(request.htmx.current_url or request.get_full_path())
            login = redirect_to_login(back_to.path + (f"?{back_to.query}" if back_to.query else ""))
            return HttpResponseClientRedirect(login["Location"])
        return plain(request, *args, **kwargs)

    return wrapper


def render_live(
    request: HtmxHttpRequest, template: str, context: dict[str, Any], *, final: bool
) -> HttpResponse:
    """The whole page, or for an htmx poll only its live part; 286 stops a finished poll."""
    if not request.htmx:
        return render(request, template, context)
    html = render_to_string(f"{template}#live", context, request=request)
    if final:
        return HttpResponseStopPolling(html)
    return HttpResponse(html)


def call_for_button(
    request: HttpRequest, action: Callable[[], Any], *, done: str, subject: str = ""
) -> bool:
    """Call a service for a button; its refusal or its success is a message on the next page."""
    try:
        action()
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, subject + " ".join(refusal_messages(error)))
        return False
    messages.success(request, subject + done)
    return True


def refusal_messages(error: ValidationError | PermissionDenied) -> list[str]:
    if isinstance(error, ValidationError):
        return error.messages
    return [str(error) or _("You may not do that.")]


def already_submitted(request: HttpRequest, token: str) -> int | None:
    """The id of what this exact form created before, when it is submitted twice."""
    if not token:
        return None
    return request.session.get(SUBMITTED_KEY, {}).get(token)


def remember_submission(request: HttpRequest, token: str, object_id: int) -> None:
    if not token:
        return
    submitted = request.session.get(SUBMITTED_KEY, {})
    submitted[token] = object_id
    # Keep the session small: only the most recent forms matter for a double submit.
    request.session[SUBMITTED_KEY] = dict(list(submitted.items())[-SUBMITTED_KEEP:])
