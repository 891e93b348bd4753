"""The team's use of a pending claim's device class, before and after approving it."""

from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from claims.models import ClaimRequest
from claims.policy import quota

register = template.Library()


@register.inclusion_tag("claims/_team_use.html")
def team_use(item: Any) -> dict[str, Any]:
    """Nothing for namespaces, decided claims, or claims of owners in no team. A page of
    claims is read in a few queries when the view calls quota.with_team_use on it."""
    if not isinstance(item, ClaimRequest) or item.state != ClaimRequest.State.PENDING:
        return {"use": None}
    if not hasattr(item, "team_use"):  # a row alone; a page has them from quota.with_team_use
        quota.with_team_use([item])
    use = getattr(item, "team_use", None)
    return {"use": use, "item": item, **(_words(use) if use else {})}


def _words(use: quota.Use) -> dict[str, SafeString]:
    """The line's sentences, as {% blocktranslate %} would make them (the same messages, the
    values escaped), but here: the approval queue has one per row, and this costs a tenth."""
    names = {
        "team": conditional_escape(use.team.name),
        "device_class": conditional_escape(use.device_class),
        "cluster": conditional_escape(use.cluster.name),
    }
    counts = {"held": use.held, "after": use.after, "limit": use.limit}
    if use.limit is not None:
        said = _(
            "<strong>%(held)s</strong> of %(limit)s held now, <strong>%(after)s</strong> of "
            "%(limit)s after approving"
        )
    else:
        said = _("<strong>%(held)s</strong> held now, <strong>%(after)s</strong> after approving")
    return {
        "heading": mark_safe(_("Team %(team)s, %(device_class)s on %(cluster)s:") % names),
        "counts": mark_safe(said % counts),
    }
