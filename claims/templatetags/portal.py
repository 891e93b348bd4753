"""Template helpers: state badges, times in words and in the reader's date format, stored
messages in the reader's language, the approver check, the "simulated cluster" banner."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.template.defaultfilters import stringfilter, truncatechars
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import add_truncation_text
from django.utils.translation import gettext as _
from django.utils.translation import pgettext, pgettext_lazy

from claims.domain import expiry, idle_reclaim, state_messages
from claims.policy import rules
from claims.policy.verdict import Verdict, run_verdict
from claims.read import approval_queue, kueue, planned, selectors, timewords, utilisation

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
    "started": "info",
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
    "started": pgettext_lazy("state", "started"),
    "stopped": pgettext_lazy("state", "stopped"),
    "succeeded": pgettext_lazy("state", "succeeded"),
    "waiting": pgettext_lazy("state", "ready · not in use"),
}


@register.filter
def state_label(state: str) -> str:
    """A state as the pages name it ("waiting" is "ready · not in use"); "" stays ""."""
    return str(BADGE_LABELS.get(state, state.replace("_", " ")))


@register.filter
def state_badge(state: str) -> SafeString:
    tone = BADGE_TONES.get(state, "idle")
    return format_html('<span class="badge {} state-{}">{}</span>', tone, state, state_label(state))


@register.filter(is_safe=True)
@stringfilter
def clip(text: str, length: int) -> str:
    """truncatechars, without its walk over every character for plain ASCII text (no
    combining characters, already normalized): a page of long purposes spent a sixth of its
    rendering in that walk."""
    if not text.isascii() or length < 1:
        return truncatechars(text, length)
    return text if len(text) <= length else add_truncation_text(text[: length - 1])


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute (never "0 minutes ago"), else Django's timesince."""
    return timewords.ago(moment) if moment is not None else ""


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
def when(moment: datetime | None) -> str:
    """A moment in the reader's date format, with its zone: "March 9, 2026, 9 a.m. UTC",
    "9 במרץ 2026 09:00 UTC" (Django's formats of the active language)."""
    if moment is None:
        return ""
    local = timezone.localtime(moment)
    return f"{date_format(local, 'DATETIME_FORMAT')} {date_format(local, 'T')}"


_FIELD = re.compile(r"%\((\w+)\)([sd])")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _pattern(msgid: str) -> re.Pattern[str]:
    """What msgid % values looks like: a regular expression with a group per value."""
    parts, end = [], 0
    for field in _FIELD.finditer(msgid):
        parts.append(re.escape(msgid[end : field.start()]))
        parts.append(rf"(?P<{field[1]}>\d+)" if field[2] == "d" else rf"(?P<{field[1]}>.+?)")
        end = field.end()
    return re.compile("".join([*parts, re.escape(msgid[end:])]) + r"\Z", re.S)


# The messages rows keep in English with values in them (claims.domain.expiry, claims.policy.rules,
# claims.domain.state_messages).
MESSAGES = [
    (msgid, _pattern(msgid))
    for msgid in (
        *expiry.MESSAGES,
        *idle_reclaim.MESSAGES,
        *rules.MESSAGES,
        *state_messages.MESSAGES,
    )
]


@register.filter
def user_message(message: str) -> str:
    """A stored message in the reader's language: one of MESSAGES translated with its values
    (times in the reader's format, a decision within translated too), any other through the
    catalog as it is (most are gettext_noop constants)."""
    if not message:
        return ""
    for msgid, pattern in MESSAGES:
        if found := pattern.match(message):
            values = {name: _value(name, value) for name, value in found.groupdict().items()}
            try:
                return _(msgid) % values
            except (KeyError, TypeError, ValueError):  # a translation that lost a value
                return msgid % values
    return _(message)


# Values that are messages of their own ("Approved by carol.", "no reason given").
NESTED = ("decision", "reason", "before")


def _value(name: str, value: str) -> Any:
    if _STAMP.fullmatch(value):
        return when(datetime.strptime(value, expiry.STAMP).replace(tzinfo=UTC))
    if name in NESTED:
        return user_message(value)
    if name == "state":  # a state's label, as the models name it
        return pgettext("state", value)
    return int(value) if value.isdigit() else value


@register.filter
def verdict(run: Any) -> Verdict:
    """A run's verdict in one word and why (claims.policy.verdict)."""
    return run_verdict(run)


@register.filter
def kueue_line(workload: Any) -> kueue.KueueLine | None:
    """What Kueue says of a workload's Job, where Kueue queues it (claims/read/kueue.py)."""
    return kueue.kueue_line(workload)


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
    return waiting if waiting is not None else approval_queue.approval_count(user)


LIVE_PARAMS = ("since", "count", "namespaces", "claims", "shown_ns", "shown_claims")


@register.simple_tag(takes_context=True)
def page_query(context: template.Context, param: str, position: object) -> str:
    """This page's query string (its filters, the other kind's page) with `param`
    (<kind>_after or <kind>_before) at `position`, in place of that kind's page."""
    query = context["request"].GET.copy()
    kind = param.rpartition("_")[0]
    for name in (*LIVE_PARAMS, f"{kind}_after", f"{kind}_before"):
        query.pop(name, None)  # a live update's own parameters are no part of the filters
    query[param] = str(position)
    return query.urlencode()


@register.filter
def alternative_taken(holder: Any) -> str:
    """Which of its claim's alternatives a claim or a run got, in words ("" for none)."""
    claim = getattr(holder, "claim", holder)
    return planned.allocated_alternative_label(claim, holder.allocated_alternative)


@register.filter
def usage_chart(usage: Any) -> utilisation.Chart | None:
    """The claim page's chart of activity and memory over the claim's life."""
    return utilisation.chart(usage) if usage else None


@register.filter
def open_idle_warning(claim: Any) -> Any:
    """The claim's idle warning that still runs (claims.domain.idle_reclaim), or None."""
    return idle_reclaim.open_warning(claim)
