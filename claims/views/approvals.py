"""The approval queue: approvers approve or reject in place (the row is swapped by htmx)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from claims import feasibility, limits, selectors, services
from claims.forms import RejectForm
from claims.models import ClaimRequest, NamespaceRequest
from claims.views.common import HtmxHttpRequest, login_required

ROWS = {
    NamespaceRequest: ("claims/approvals.html#namespace-row", "ns"),
    ClaimRequest: ("claims/approvals.html#claim-row", "claim"),
}


def _require_approver(request: HtmxHttpRequest) -> None:
    if not selectors.user_is_approver(request.user):
        raise PermissionDenied("Only approvers see the approval queue.")


@login_required
def approvals(request: HtmxHttpRequest) -> HttpResponse:
    _require_approver(request)
    queue = selectors.approval_queue(user=request.user)
    # The oldest few of each kind: a flood of requests must not make a page of megabytes.
    shown = limits.APPROVALS_SHOWN
    taken: feasibility.Taken = {}
    claims = [_with_feasibility(claim, taken) for claim in queue["claims"][:shown]]
    context = {
        "nav": "approvals",
        "namespaces": queue["namespaces"][:shown],
        "claims": claims,
        "namespace_total": queue["namespaces"].count(),
        "claim_total": queue["claims"].count(),
    }
    return render(request, "claims/approvals.html", context)


def _with_feasibility(claim: ClaimRequest, taken: feasibility.Taken | None = None) -> ClaimRequest:
    """The approver sees whether a pending claim can ever be met, and what is free now."""
    if claim.state == ClaimRequest.State.PENDING:
        claim.feasibility = feasibility.of_claim(claim, taken)  # type: ignore[attr-defined]
    return claim


@dataclass(frozen=True)
class Decision:
    """What approving or rejecting one kind of request calls, and the row it redraws."""

    model: type[NamespaceRequest] | type[ClaimRequest]
    argument: str
    approve: Callable[..., Any]
    reject: Callable[..., Any]


DECISIONS = {
    "namespace": Decision(
        NamespaceRequest,
        "namespace_request",
        services.namespace_request_approve,
        services.namespace_request_reject,
    ),
    "claim": Decision(
        ClaimRequest,
        "claim_request",
        services.claim_request_approve,
        services.claim_request_reject,
    ),
}


@login_required
@require_POST
def request_approve(request: HtmxHttpRequest, kind: str, pk: int) -> HttpResponse:
    decision = DECISIONS[kind]
    item = _pending_item(request, decision.model, pk)
    target = {decision.argument: item}
    return _decide(request, item, lambda: decision.approve(user=request.user, **target))


@login_required
@require_POST
def request_reject(request: HtmxHttpRequest, kind: str, pk: int) -> HttpResponse:
    decision = DECISIONS[kind]
    item = _pending_item(request, decision.model, pk)
    target = {decision.argument: item}
    return _reject(
        request, item, lambda reason: decision.reject(user=request.user, reason=reason, **target)
    )


def _pending_item(request: HtmxHttpRequest, model: type, pk: int) -> Any:
    _require_approver(request)
    return get_object_or_404(model, pk=pk)


def _reject(request: HtmxHttpRequest, item: Any, reject: Callable[[str], Any]) -> HttpResponse:
    form = RejectForm(request.POST)
    if not form.is_valid():
        return _row(request, item, reject_form=form)
    return _decide(request, item, lambda: reject(form.cleaned_data["reason"]), form)


def _decide(
    request: HtmxHttpRequest, item: Any, decide: Callable[[], Any], form: RejectForm | None = None
) -> HttpResponse:
    try:
        decide()
    except ValidationError as error:
        item.refresh_from_db()
        return _row(request, item, reject_form=form, decision_error=" ".join(error.messages))
    item.refresh_from_db()
    return _row(request, item)


def _row(
    request: HtmxHttpRequest,
    item: Any,
    *,
    reject_form: RejectForm | None = None,
    decision_error: str = "",
) -> HttpResponse:
    """The decided row for htmx; without JavaScript, back to the queue with a message."""
    if not request.htmx:
        reason_errors = reject_form.errors.get("reason") if reject_form else None
        problem = decision_error or " ".join(str(error) for error in reason_errors or [])
        if problem:
            messages.error(request, f"{item.name}: {problem}")
        return redirect("approvals")
    template, name = ROWS[type(item)]
    if isinstance(item, ClaimRequest):
        _with_feasibility(item)
    context = {name: item, "reject_form": reject_form, "decision_error": decision_error}
    html = render_to_string(template, context, request=request)
    if isinstance(item, ClaimRequest):
        # Approving a claim approves its pending namespace too: update that row as well.
        html += render_to_string(
            ROWS[NamespaceRequest][0], {"ns": item.namespace_request, "oob": True}, request=request
        )
    waiting = selectors.approval_count(request.user)
    html += render_to_string("claims/_pending_count.html", {"waiting": waiting}, request=request)
    return HttpResponse(html)
