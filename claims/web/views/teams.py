"""Teams, their quotas and use, and the approval rules: read-only (admins edit them in the
Django admin)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render

from claims.models import ApprovalRule
from claims.policy import quota
from claims.read import selectors
from claims.web.views.common import HtmxHttpRequest, login_required


@login_required
def team_list(request: HtmxHttpRequest) -> HttpResponse:
    teams = [(team, quota.quota_lines(team)) for team in selectors.team_list(user=request.user)]
    rules = ApprovalRule.objects.filter(enabled=True).select_related("team", "cluster")
    context = {
        "nav": "teams",
        "teams": teams,
        "rules": rules,
        "allow_self_approval": settings.ALLOW_SELF_APPROVAL,
    }
    return render(request, "claims/teams.html", context)
