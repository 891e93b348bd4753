"""Helpers shared by the page views: live partials and one-time form tokens."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django_htmx.http import HttpResponseStopPolling

SUBMITTED_KEY = "submitted_forms"
SUBMITTED_KEEP = 50


def render_live(
    request: HttpRequest, template: str, context: dict[str, Any], *, final: bool
) -> HttpResponse:
    """The whole page, or for an htmx poll only its live part; 286 stops a finished poll."""
    if not request.htmx:
        return render(request, template, context)
    html = render_to_string(f"{template}#live", context, request=request)
    if final:
        return HttpResponseStopPolling(html)
    return HttpResponse(html)


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
