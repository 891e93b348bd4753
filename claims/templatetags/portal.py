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


@register.simple_tag
def simulated_banner() -> SafeString:
    """Always say so when a cluster is simulated: its GPUs and logs are not real."""
    names = [cluster.name for cluster in selectors.cluster_list() if cluster.simulated]
    if not names:
        return SafeString("")
    return format_html(
        '<div class="simulated-banner" id="simulated-banner"><strong>Simulated cluster:</strong> '
        "the GPUs, allocations and CUDA output of {} come from kubesim, the portal's "
        "embedded Kubernetes simulator, not from real hardware.</div>",
        ", ".join(names),
    )


@register.simple_tag
def pending_approvals(user: Any) -> int:
    return selectors.approval_count(user)
