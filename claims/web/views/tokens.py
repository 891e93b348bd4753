"""The page where a user makes and revokes personal API tokens (knox: stored hashed)."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST
from knox.models import AuthToken

from claims.domain import audit_receivers

TOKEN_PREFIX = "gpup_"
EXPIRY_CHOICES = [
    ("1", "1 day"),
    ("7", "7 days"),
    ("30", "30 days"),
    ("90", "90 days"),
    ("365", "1 year"),
    ("never", "Never"),
]


class TokenForm(forms.Form):
    expires_in = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="30", label="Expires in")

    def expiry(self) -> timedelta | None:
        days = self.cleaned_data["expires_in"]
        return None if days == "never" else timedelta(days=int(days))


class RevokeForm(forms.Form):
    token_key = forms.CharField(max_length=25)


def _context(request: HttpRequest, form: TokenForm | None = None) -> dict:
    tokens = AuthToken.objects.filter(user=request.user).order_by("-created")
    return {"nav": "tokens", "form": form or TokenForm(), "tokens": tokens, "now": timezone.now()}


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    return render(request, "tokens/token_list.html", _context(request))


@login_required
@require_POST
@transaction.atomic  # the token and its audit row, or neither
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        return render(request, "tokens/token_list.html", _context(request, form), status=400)
    token, secret = AuthToken.objects.create(
        user=request.user, expiry=form.expiry(), prefix=TOKEN_PREFIX
    )
    audit_receivers.token_created(user=request.user, token=token)
    # The secret is shown on this one response only; the database keeps its hash.
    context = {**_context(request), "new_secret": secret, "new": token}
    return render(request, "tokens/token_list.html", context)


@login_required
@require_POST
@transaction.atomic
def token_revoke(request: HttpRequest) -> HttpResponse:
    form = RevokeForm(request.POST)
    deleted = 0
    if form.is_valid():
        key = form.cleaned_data["token_key"]
        deleted, _ = AuthToken.objects.filter(user=request.user, token_key=key).delete()
    if deleted:
        audit_receivers.token_revoked(user=request.user, token_key=key)
        messages.success(request, gettext("Token revoked: scripts using it can no longer log in."))
    else:
        messages.error(request, gettext("No such token of yours; it may be revoked already."))
    return redirect("api-tokens")
