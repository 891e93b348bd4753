"""The workload profiles: everyone sees the ones offered; admins add, change and remove them
(the same rights as in the Django admin: staff with the model's permissions)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from claims.domain import services
from claims.models import WorkloadProfile
from claims.read import selectors
from claims.web.views.common import HtmxHttpRequest, login_required
from claims.web.workload_forms import WorkloadProfileForm


def _require_admin(request: HtmxHttpRequest, permission: str) -> None:
    user = request.user
    if not (user.is_staff and user.has_perm(f"claims.{permission}")):
        raise PermissionDenied(_("Only an admin changes workload profiles."))


def may_edit(user: object) -> bool:
    return bool(getattr(user, "is_staff", False)) and user.has_perm(  # type: ignore[attr-defined]
        "claims.change_workloadprofile"
    )


@login_required
def profile_list(request: HtmxHttpRequest) -> HttpResponse:
    context = {
        "nav": "workload-profiles",
        "profiles": selectors.workload_profile_list(user=request.user),
        "may_edit": may_edit(request.user),
    }
    return render(request, "claims/workload_profiles.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def profile_edit(request: HtmxHttpRequest, pk: int | None = None) -> HttpResponse:
    _require_admin(request, "change_workloadprofile" if pk else "add_workloadprofile")
    profile = get_object_or_404(WorkloadProfile, pk=pk) if pk else WorkloadProfile()
    form = WorkloadProfileForm(request.POST or None, instance=profile)
    if request.method == "POST" and form.is_valid():
        fields, unparsed = form.service_fields()
        try:
            if unparsed:  # every error at once: the text's, and what the service finds
                problems = services.workload_profile_problems(profile=profile, **fields)
                raise ValidationError({**problems, **unparsed})
            services.workload_profile_save(profile=profile, **fields)
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, _("Profile %(name)s saved.") % {"name": profile.name})
            return redirect("workload-profiles")
    context = {"nav": "workload-profiles", "form": form, "profile": profile}
    return render(request, "claims/workload_profile_form.html", context)


@login_required
@require_http_methods(["POST"])
def profile_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    _require_admin(request, "delete_workloadprofile")
    profile = get_object_or_404(WorkloadProfile, pk=pk)
    services.workload_profile_delete(profile=profile)
    messages.success(request, _("Profile %(name)s removed.") % {"name": profile.name})
    return redirect("workload-profiles")
