"""Teams, their quotas and use, the approval rules, and the month's GPU-hours: read-only
(admins edit teams in the Django admin), but for a team's idle reclaim policy, which admins
and the team's approvers set on the Teams page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from claims.domain import teams as domain_teams
from claims.models import ApprovalRule, Team, TeamMembership
from claims.policy import quota
from claims.read import gpu_hours as hours
from claims.read import idle_claims as idle_first
from claims.read import selectors
from claims.web.team_forms import IdlePolicyForm
from claims.web.views.common import HtmxHttpRequest, login_required


def may_set_idle_policy(user: Any, team: Team) -> bool:
    """Admins (as the API and the Django admin ask) and the team's own approvers."""
    if user.is_staff and user.has_perm("claims.change_team"):
        return True
    return team.memberships.filter(user=user, role=TeamMembership.Role.APPROVER).exists()


@login_required
def team_list(
    request: HtmxHttpRequest, bound: IdlePolicyForm | None = None, status: int = 200
) -> HttpResponse:
    teams = []
    for team in selectors.team_list(user=request.user):
        form = None
        if may_set_idle_policy(request.user, team):
            form = bound if bound is not None and bound.team.pk == team.pk else None
            form = form or IdlePolicyForm(team=team)
        teams.append((team, quota.quota_lines(team), form))
    rules = ApprovalRule.objects.filter(enabled=True).select_related("team", "cluster")
    context = {
        "nav": "teams",
        "teams": teams,
        "rules": rules,
        "allow_self_approval": settings.ALLOW_SELF_APPROVAL,
    }
    return render(request, "claims/teams.html", context, status=status)


@login_required
@require_POST
def team_idle_policy(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The team's idle reclaim policy, with errors next to the fields."""
    team = get_object_or_404(selectors.team_list(user=request.user), pk=pk)
    if not may_set_idle_policy(request.user, team):
        raise PermissionDenied(_("Only an admin or the team's approvers set its idle reclaim."))
    form = IdlePolicyForm(request.POST, team=team)
    if form.is_valid():
        try:
            domain_teams.team_idle_policy_set(team=team, **form.policy())
        except ValidationError as error:
            for field, messages_ in error.message_dict.items():
                form.add_error(field if field in form.fields else None, messages_)
        else:
            messages.success(request, _("Saved the idle reclaim of %(team)s.") % {"team": team})
            return redirect(reverse("teams") + f"#team-{team.pk}")
    return team_list(request, bound=form, status=400)


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
