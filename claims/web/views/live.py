"""Live regions that wait for a change instead of polling on a timer.

A live page is made of parts: template partials whose root element has an id and
hx-swap-oob. After them comes a watcher element that htmx GETs on load. Its URL carries the
version the page shows and a token per part (a digest of its HTML, or for a log pane with
text the length it shows). That request waits for the change signal, then answers with a
new watcher and only the parts whose HTML changed; log panes get their new text appended.
The rest of the page is not touched, so focus and text selection survive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from claims.live import changes
from claims.web.views.common import HtmxHttpRequest

# Django masks the CSRF token differently on every render: it is no change.
CSRF_VALUE = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')
# A retry after a failed request (network, server restart), and the poll past the bound.
RETRY_SECONDS = 5


@dataclass(frozen=True)
class LivePage:
    template: str
    name: str  # the watcher's id is "<name>-watch"
    parts: tuple[str, ...]


@dataclass
class Live:
    """How to read the page's state: its version, where changes are announced, its context.

    The context may hold "live_final" (nothing changes any more: stop watching), "logs",
    a list of objects with container, text and truncated, each rendered by the "log" partial,
    and "live_query", parameters the watcher's URL carries so the context is read the same way.
    """

    version: Callable[[], Any]
    channels: list[str]
    context: Callable[[], dict[str, Any]]


def respond(
    request: HtmxHttpRequest, page: LivePage, live: Live, *, partial: str = ""
) -> HttpResponse:
    """The whole page (or only its partial, for a region htmx redraws), or for the watcher the
    parts that changed once something did."""
    if "since" not in request.GET:
        version = live.version()
        context = live.context()
        parts = _render(request, page, context)
        watch = _watcher(request, page, version, parts, context)
        shown = {name: mark_safe(html) for name, (html, _) in parts.items()}
        panes = [shown[f"log-{log.container}"] for log in context.get("logs", [])]
        return render(
            request,
            f"{page.template}#{partial}" if partial else page.template,
            context | {"live": shown, "live_logs": panes, "live_watch": watch},
        )
    since = request.GET["since"]
    # The wait's first look (once subscribed) says whether it changed already.
    changed = changes.wait_in_turn(
        request.user.pk,
        live.channels,
        lambda: str(live.version()) != since,
        seconds=settings.LIVE_WAIT_SECONDS,
    )
    if changed is None and str(live.version()) == since:  # no turn to wait: ask again later
        return HttpResponse(_watcher_at(request, page, request.GET, RETRY_SECONDS))
    if changed is False:
        return HttpResponse(_watcher_at(request, page, request.GET, 0))
    return _changed_parts(request, page, live)


def _changed_parts(request: HtmxHttpRequest, page: LivePage, live: Live) -> HttpResponse:
    version = live.version()
    context = live.context()
    parts = _render(request, page, context)
    known = request.GET
    body: list[str] = [_watcher(request, page, version, parts, context)]
    for name, (html, token) in parts.items():
        if known.get(name) == token:
            continue
        appended = _appended(name, known.get(name, ""), context)
        body.append(appended if appended is not None else html)
    return HttpResponse("".join(body))


def _render(
    request: HtmxHttpRequest, page: LivePage, context: dict[str, Any]
) -> dict[str, tuple[str, str]]:
    """Each part's HTML and token, by the name the watcher's URL uses for it."""
    parts: dict[str, tuple[str, str]] = {}
    for name in page.parts:
        html = render_to_string(f"{page.template}#{name}", context, request=request)
        parts[name] = (html, _digest(html))
    for log in context.get("logs", []):
        html = render_to_string(f"{page.template}#log", context | {"log": log}, request=request)
        parts[f"log-{log.container}"] = (html, _log_token(log) or _digest(html))
    return parts


def _digest(html: str) -> str:
    return hashlib.sha256(CSRF_VALUE.sub("", html).encode()).hexdigest()[:12]


def _log_token(log: Any) -> str:
    """n<length> while the pane shows the log from its start: new text is then appended."""
    if getattr(log, "text", "") and not getattr(log, "truncated", False):
        return f"n{len(log.text)}"
    return ""


def _appended(name: str, known: str, context: dict[str, Any]) -> SafeString | None:
    """The new end of a log pane the page has from the start, or None to replace the part."""
    if not name.startswith("log-") or not known.startswith("n") or not known[1:].isdigit():
        return None
    log = next(log for log in context["logs"] if f"log-{log.container}" == name)
    shown = int(known[1:])
    if not _log_token(log) or shown == 0 or shown > len(log.text):
        return None
    return format_html(
        '<div hx-swap-oob="beforeend:#log-{}">{}</div>', log.container, log.text[shown:]
    )


def _watcher(
    request: HtmxHttpRequest,
    page: LivePage,
    version: Any,
    parts: dict[str, tuple[str, str]],
    context: dict[str, Any],
) -> SafeString:
    if context.get("live_final"):
        return format_html('<div id="{}-watch"></div>', page.name)
    query = QueryDict(mutable=True)
    # What else the page's context depends on (its filters, say) goes along with each wait.
    query.update(context.get("live_query", {}))
    query.update({"since": str(version), **{name: token for name, (_, token) in parts.items()}})
    return _watcher_at(request, page, query, 0)


def _watcher_at(
    request: HtmxHttpRequest, page: LivePage, query: QueryDict, delay: float
) -> SafeString:
    url = f"{request.path}?{urlencode(sorted(query.items()))}"
    return format_html(
        '<div id="{}-watch" hx-get="{}" hx-trigger="load delay:{}s, live-retry delay:{}s"'
        ' hx-swap="outerHTML"></div>',
        page.name,
        url,
        delay,
        RETRY_SECONDS,
    )
