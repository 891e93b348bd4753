"""Teams, their quotas and use, the approval rules, and the month's GPU-hours: read-only
(admins edit teams in the Django admin)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from claims.models import ApprovalRule
from claims.policy import quota
from claims.read import gpu_hours as hours
from claims.read import idle_claims as idle_first
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


@login_required
@require_GET
def gpu_hours(request: HtmxHttpRequest) -> HttpResponse:
    """GPU-hours of the month per team and user, held and busy; ?format=csv for the CSV."""
    try:
        report = hours.gpu_hours(request.user, request.GET.get("month") or None)
    except ValueError:
        error = _("Give the month as YYYY-MM, e.g. 2026-03.")
        report = hours.gpu_hours(request.user, None)
        return render(
            request,
            "claims/gpu_hours.html",
            {"nav": "gpu-hours", "report": report, "month_error": error},
            status=400,
        )
    if request.GET.get("format") == "csv":
        response = HttpResponse(hours.as_csv(report), content_type="text/csv; charset=utf-8")
        filename = f"gpu-hours-{report.month}.csv"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    return render(request, "claims/gpu_hours.html", {"nav": "gpu-hours", "report": report})


@login_required
@require_GET
def idle_claims(request: HtmxHttpRequest) -> HttpResponse:
    """Approvers and admins: the claims in use, idle first."""
    if not selectors.user_is_approver(request.user):
        raise PermissionDenied(_("Only approvers see every claim's use."))
    rows, no_data = idle_first.claims_idle_first(request.user)
    context = {"nav": "gpu-hours", "rows": rows, "no_data": no_data}
    return render(request, "claims/idle_claims.html", context)
