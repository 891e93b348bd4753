"""Template helpers: state badges, the approver check, the "simulated cluster" banner."""

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

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
    "waiting": "info",
    "creating": "info",
    "running": "info",
    "rejected": "bad",
    "failed": "bad",
}


@register.filter
def state_badge(state: str) -> SafeString:
    tone = BADGE_TONES.get(state, "idle")
    label = state.replace("_", " ")
    return format_html('<span class="badge {} state-{}">{}</span>', tone, state, label)


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


@register.simple_tag(takes_context=True)
def page_query(context: template.Context, param: str, number: int) -> str:
    """This page's query string (its filters) with another page number."""
    query = context["request"].GET.copy()
    query[param] = str(number)
    return query.urlencode()
