"""Template helpers: state badges, times in words, the approver check, the "simulated
cluster" banner."""

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

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
BADGE_LABELS = {
    "active": pgettext_lazy("state", "active"),
    "applying": pgettext_lazy("state", "applying"),
    "approved": pgettext_lazy("state", "approved"),
    "creating": pgettext_lazy("state", "creating"),
    "deleted": pgettext_lazy("state", "deleted"),
    "deleting": pgettext_lazy("state", "deleting"),
    "failed": pgettext_lazy("state", "failed"),
    "in_use": pgettext_lazy("state", "in use"),
    "pending": pgettext_lazy("state", "pending"),
    "queued": pgettext_lazy("state", "queued"),
    "rejected": pgettext_lazy("state", "rejected"),
    "released": pgettext_lazy("state", "released"),
    "running": pgettext_lazy("state", "running"),
    "succeeded": pgettext_lazy("state", "succeeded"),
    "waiting": pgettext_lazy("state", "ready · not in use"),
}


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
        return _("just now")
    return _("%(time)s ago") % {"time": timesince(moment)}


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
        return _("%(hours)d h %(minutes)02d min") % {"hours": hours, "minutes": minutes}
    if minutes:
        return _("%(minutes)d min %(seconds)02d s") % {"minutes": minutes, "seconds": secs}
    return _("%(seconds)d s") % {"seconds": secs}


@register.filter
def is_approver(user: Any) -> bool:
    return selectors.user_is_approver(user)


@register.filter
def may_decide(user: Any) -> bool:
    """Staff approvers and team approvers (their teams' requests): the approval queue."""
    return selectors.user_may_decide(user)


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
        '<div class="simulated-banner" id="simulated-banner"><strong>{}</strong> {}</div>',
        _("Simulated cluster:"),
        _(
            "the GPUs, allocations and CUDA output of %(clusters)s come from kubesim, the "
            "portal's embedded Kubernetes simulator, not from real hardware."
        )
        % {"clusters": ", ".join(names)},
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
