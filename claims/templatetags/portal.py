"""Template helpers: state badges, times in words, the approver check, the "simulated
cluster" banner."""

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from claims import selectors

register = template.Library()

BADGE_TONES = {
    "active": "ok",
    "in_use": "ok",
    "in use": "ok",
    "succeeded": "ok",
    "pending": "warn",
    "queued": "info",
    "approved": "info",
    "applying": "info",
    "waiting": "ok",
    "creating": "info",
    "running": "info",
    "rejected": "bad",
    "failed": "bad",
}


# A claim that waits holds no GPU yet but is ready to use: "waiting" read as "not ready".
BADGE_LABELS = {"waiting": "ready · not in use", "in_use": "in use"}


@register.filter
def state_badge(state: str) -> SafeString:
    tone = BADGE_TONES.get(state, "idle")
    label = BADGE_LABELS.get(state, state.replace("_", " "))
    return format_html('<span class="badge {} state-{}">{}</span>', tone, state, label)


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute (never "0 minutes ago"), else Django's timesince."""
    if moment is None:
        return ""
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment)} ago"


@register.filter
def duration(seconds: float | timedelta | None) -> str:
    """A length of time as people say it: 45 s, 3 min 05 s, 2 h 07 min."""
    if seconds is None:
        return ""
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


@register.filter
def is_approver(user: Any) -> bool:
    return selectors.user_is_approver(user)


@register.simple_tag(takes_context=True)
def simulated_banner(context: template.Context) -> SafeString:
    """Always say so when a cluster is simulated: its GPUs and logs are not real.

    A page that lists the clusters anyway passes them as all_clusters (one query less)."""
    clusters = context.get("all_clusters")
    if clusters is None:
        clusters = selectors.cluster_list().only("name", "simulated")
    names = [cluster.name for cluster in clusters if cluster.simulated]
    if not names:
        return SafeString("")
    return format_html(
        '<div class="simulated-banner" id="simulated-banner"><strong>Simulated cluster:</strong> '
        "the GPUs, allocations and CUDA output of {} come from kubesim, the portal's "
        "embedded Kubernetes simulator, not from real hardware.</div>",
        ", ".join(names),
    )


@register.simple_tag(takes_context=True)
def pending_approvals(context: template.Context, user: Any) -> int:
    """The menu's count; a page that counted the queue already passes approvals_waiting."""
    waiting = context.get("approvals_waiting")
    return waiting if waiting is not None else selectors.approval_count(user)


LIVE_PARAMS = ("since", "count", "namespaces", "claims", "shown_ns", "shown_claims")


@register.simple_tag(takes_context=True)
def page_query(context: template.Context, param: str, number: int) -> str:
    """This page's query string (its filters) with another page number."""
    query = context["request"].GET.copy()
    for name in LIVE_PARAMS:  # a live update's own parameters are no part of the filters
        query.pop(name, None)
    query[param] = str(number)
    return query.urlencode()
