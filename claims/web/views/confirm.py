"""Confirmation pages for destructive actions: GET says exactly what will go, POST does it.

Each action keeps its URL: a GET there shows the confirmation (no JavaScript needed, a plain
form that a keyboard reaches), and only the POST from it acts. The API is not involved.
Deleting a namespace is also a button on the dashboard: its POST asks too, and only a POST
with `confirmed` (the confirmation's form) acts.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods
from knox.models import AuthToken

from claims.models import ClaimRequest, NamespaceRequest, VerificationRun, Workload
from claims.read import selectors
from claims.web.views import requests, tokens
from claims.web.views.common import HtmxHttpRequest, login_required

NS = NamespaceRequest.State


def confirm_namespace_delete(request: HtmxHttpRequest, ns: NamespaceRequest) -> HttpResponse:
    claims = list(
        ns.claim_requests.exclude(state__in=ClaimRequest.FINAL_STATES).order_by("created")
    )
    runs = VerificationRun.objects.filter(claim__in=claims).exclude(
        state__in=VerificationRun.FINAL_STATES
    )
    context = {
        "ns": ns,
        "withdraw": ns.state == NS.PENDING,
        "claims": claims,
        "runs": list(runs.select_related("claim").order_by("created")),
    }
    return render(request, "claims/confirm_namespace_delete.html", context)


def confirm_claim_release(request: HtmxHttpRequest, claim: ClaimRequest) -> HttpResponse:
    runs = claim.runs.exclude(state__in=VerificationRun.FINAL_STATES).order_by("created")
    unread = selectors.runs_with_unread_logs(claim)
    workloads = claim.workloads.exclude(state__in=Workload.FINAL_STATES).order_by("created")
    context = {
        "claim": claim,
        "runs": list(runs),
        "unread_runs": unread,
        "workloads": list(workloads),
    }
    return render(request, "claims/confirm_claim_release.html", context)


def confirm_run_cancel(request: HtmxHttpRequest, run: VerificationRun) -> HttpResponse:
    return render(request, "claims/confirm_run_cancel.html", {"run": run})


@login_required
@require_http_methods(["GET", "POST"])
def namespace_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    if request.method == "POST" and request.POST.get("confirmed"):
        return requests.namespace_delete(request, pk)
    ns = selectors.namespace_request_get(user=request.user, pk=pk)
    return confirm_namespace_delete(request, ns)


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        return tokens.token_revoke(request)
    token = _own_token(request, request.GET.get("token_key", ""))
    return render(request, "tokens/confirm_revoke.html", {"token": token, "nav": "tokens"})


def _own_token(request: HtmxHttpRequest, key: str) -> Any:
    token = AuthToken.objects.filter(user=request.user, token_key=key).first()
    if token is None:
        raise Http404(_("No such token of yours; it may be revoked already."))
    return token
