"""The team's use of a pending claim's device class, before and after approving it."""

from typing import Any

from django import template

from claims import quota
from claims.models import ClaimRequest

register = template.Library()


@register.inclusion_tag("claims/_team_use.html")
def team_use(item: Any) -> dict[str, Any]:
    """Nothing for namespaces, decided claims, or claims of owners in no team."""
    if not isinstance(item, ClaimRequest) or item.state != ClaimRequest.State.PENDING:
        return {"use": None}
    team = quota.team_of(item.owner)
    use = quota.approval_use(team, item) if team else None
    return {"use": use, "item": item}
