"""The team's use of a pending claim's device class, before and after approving it."""

from typing import Any

from django import template

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
    return {"use": getattr(item, "team_use", None), "item": item}
