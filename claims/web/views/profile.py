"""The user's own page: which emails the portal sends them."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from claims.models import Profile
from claims.web.views.common import login_required

NOTIFY_FIELDS = [
    "notify_decisions",
    "notify_allocation",
    "notify_failure",
    "notify_expiry",
    "notify_approvals",
]


class NotificationsForm(forms.ModelForm):
    class Meta:
        model = Profile
        fields = NOTIFY_FIELDS


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    mine, _created = Profile.objects.get_or_create(user_id=int(request.user.pk or 0))
    form = NotificationsForm(request.POST or None, instance=mine)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Your notification choices are saved."))
        return redirect("profile")
    return render(request, "claims/profile.html", {"form": form, "nav": "profile"})
