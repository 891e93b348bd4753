"""Asking for more time for a claim, and an approver's answer."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext, gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from claims.domain import expiry
from claims.models import ClaimExtension
from claims.read import selectors
from claims.web.views.common import call_for_button, login_required


class ExtensionForm(forms.Form):
    hours = forms.IntegerField(
        min_value=1,
        max_value=expiry.MAX_EXTENSION_HOURS,
        initial=24,
        label=gettext_lazy("Hours"),
        help_text=gettext_lazy("How many hours more the claim should live."),
    )
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=gettext_lazy("Reason"),
        help_text=gettext_lazy("Why you need it longer: helps the approver decide."),
    )


@login_required
def extension_request(request: HttpRequest, pk: int) -> HttpResponse:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    form = ExtensionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            extension = expiry.extension_request(
                user=request.user, claim_request=claim, **form.cleaned_data
            )
        except ValidationError as error:
            form.add_error(None, error)
        except PermissionDenied as error:
            form.add_error(None, str(error))
        else:
            done = (
                gettext("Extended.")
                if extension.state == "approved"
                else gettext("Asked; an approver decides.")
            )
            messages.success(request, done)
            return redirect("claim", claim.pk)
    cap = expiry.lifetime_limits(claim)[1]
    context = {"claim": claim, "form": form, "cap": _span(cap)}
    return render(request, "claims/extension_form.html", context)


def _span(length: timedelta) -> str:
    """30 days, 36 hours: a lifetime as people say it."""
    hours = round(length.total_seconds() / 3600)
    days, rest = divmod(hours, 24)
    if days and not rest:
        return ngettext("%(n)d day", "%(n)d days", days) % {"n": days}
    return ngettext("%(n)d hour", "%(n)d hours", hours) % {"n": hours}


def _extension(request: HttpRequest, pk: int) -> ClaimExtension:
    visible = selectors.claim_request_list(user=request.user)
    return get_object_or_404(ClaimExtension.objects.filter(claim__in=visible), pk=pk)


@login_required
@require_POST
def extension_approve(request: HttpRequest, pk: int) -> HttpResponse:
    extension = _extension(request, pk)

    def action() -> ClaimExtension:
        return expiry.extension_approve(user=request.user, extension=extension)

    call_for_button(request, action, done=gettext("Extension approved."))
    return redirect("claim", extension.claim_id)


@login_required
@require_POST
def extension_reject(request: HttpRequest, pk: int) -> HttpResponse:
    extension = _extension(request, pk)
    reason = request.POST.get("reason", "")

    def action() -> ClaimExtension:
        return expiry.extension_reject(user=request.user, extension=extension, reason=reason)

    call_for_button(request, action, done=gettext("Extension rejected."))
    return redirect("claim", extension.claim_id)
