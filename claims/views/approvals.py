"""The approval queue: approvers approve or reject in place (the row is swapped by htmx)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Count, Max, Value
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from claims import changes, feasibility, limits, quota, selectors, services
from claims.forms import ApprovalFilterForm, RejectForm
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.views import live
from claims.views.common import HtmxHttpRequest, login_required

ROWS = {
    NamespaceRequest: ("claims/approvals.html#namespace-row", "ns"),
    ClaimRequest: ("claims/approvals.html#claim-row", "claim"),
}
# The URLs a row links to, by the attribute the row template reads them from.
LINKS = {
    NamespaceRequest: {"approve_url": "namespace-approve", "reject_url": "namespace-reject"},
    ClaimRequest: {
        "approve_url": "claim-approve",
        "reject_url": "claim-reject",
        "detail_url": "claim",
    },
}


def _require_approver(request: HtmxHttpRequest) -> None:
    if not selectors.user_may_decide(request.user):
        raise PermissionDenied(_("Only approvers see the approval queue."))


class CountedPaginator(Paginator):
    """A paginator told its count: the queue counts both kinds in one query beforehand."""

    def __init__(self, object_list: Any, per_page: int, count: int) -> None:
        super().__init__(object_list, per_page)
        self.count = count


APPROVALS_PAGE = live.LivePage(
    "claims/approvals.html", "approvals", parts=("count", "namespaces", "claims")
)
# Parameters of the watcher's own (the version, a token per part, the rows shown so far).
WATCH_PARAMS = ("since", "shown_ns", "shown_claims", *APPROVALS_PAGE.parts)


@login_required
def approvals(request: HtmxHttpRequest) -> HttpResponse:
    """The queue, live: a new request appears without a reload; rows already shown stay, with
    the decision taken on them (here or elsewhere)."""
    _require_approver(request)
    partial = "queue" if request.htmx and request.htmx.target == "approval-queue" else ""
    return live.respond(
        request,
        APPROVALS_PAGE,
        live.Live(
            version=_queue_version,
            channels=[changes.EVERYTHING],
            context=lambda: _approvals_context(request),
        ),
        partial=partial,
    )


def _queue_version() -> str:
    """Changes with any request made, decided or removed: Redis's count of what was announced
    to approvers when it can say (no query), else the newest `updated` and the row counts."""
    counted = None if connection.in_atomic_block else changes.scope_version(changes.EVERYTHING)
    if counted is not None:
        return counted
    newest = [
        model.objects.order_by()
        .annotate(every=Value(1))
        .values("every")
        .annotate(newest=Max("updated"), count=Count("id"))
        .values_list("newest", "count")
        for model in (NamespaceRequest, ClaimRequest)
    ]
    return str(list(newest[0].union(newest[1], all=True)))


def _approvals_context(request: HtmxHttpRequest) -> dict[str, Any]:
    form = ApprovalFilterForm(request.GET)
    shown = form.queue_filter()
    queue = selectors.approval_queue(user=request.user, shown=shown)
    counts = selectors.approval_counts(user=request.user, shown=shown)
    size = limits.APPROVALS_PAGE_SIZE
    namespaces = CountedPaginator(queue["namespaces"], size, counts["namespaces_shown"])
    claims = CountedPaginator(queue["claims"], size, counts["claims_shown"])
    namespace_page = namespaces.get_page(request.GET.get("ns_page"))
    claim_page = claims.get_page(request.GET.get("claim_page"))
    ns_rows = _with_shown(list(namespace_page), NamespaceRequest, request.GET.get("shown_ns"))
    claim_rows = _with_shown(list(claim_page), ClaimRequest, request.GET.get("shown_claims"))
    _with_links(ns_rows, NamespaceRequest)
    _with_links(claim_rows, ClaimRequest)
    filters = {key: value for key, value in request.GET.items() if key not in WATCH_PARAMS}
    return {
        "nav": "approvals",
        "form": form,
        "shown": shown,
        "namespace_page": namespace_page if shown.shows("namespace") else None,
        "claim_page": claim_page if shown.shows("claim") else None,
        "namespace_rows": ns_rows if shown.shows("namespace") else [],
        "claims": _with_feasibility_all(claim_rows, form.clusters) if shown.shows("claim") else [],
        "waiting": counts["namespaces"] + counts["claims"],
        "approvals_waiting": counts["namespaces"] + counts["claims"],
        "all_clusters": form.clusters,
        "live_query": filters | _shown_ids(ns_rows, claim_rows),
        "reject_form": None,  # a row's, when a decision is redrawn (_row)
        "decision_error": "",
    }


def _with_shown(rows: list[Any], model: type[Any], shown: str | None) -> list[Any]:
    """The page's pending rows and the rows the approver saw before (decided since)."""
    ids = {int(pk) for pk in (shown or "").split(",") if pk.isdigit()}
    ids -= {row.pk for row in rows}
    if not ids:
        return rows
    related = (
        "owner",
        "decided_by",
        "cluster" if model is NamespaceRequest else "namespace_request__cluster",
    )
    extra = model.objects.filter(pk__in=ids).select_related(*related)
    return sorted([*rows, *extra], key=lambda row: (row.created, row.pk))


def _with_links(rows: list[Any], model: type[Any]) -> list[Any]:
    """Rows with their URLs: each name reversed once per page and the row's pk put in (a
    reverse() per link of every row cost a page of 50 rows about a tenth of its time)."""
    marker = "2147483647"  # any number: where it lands in the URL, each row's pk goes
    for attribute, name in LINKS[model].items():
        before, after = reverse(name, args=[marker]).split(marker)
        for row in rows:
            setattr(row, attribute, f"{before}{row.pk}{after}")
    return rows


def _shown_ids(namespaces: list[Any], claims: list[Any]) -> dict[str, str]:
    return {
        "shown_ns": ",".join(str(row.pk) for row in namespaces),
        "shown_claims": ",".join(str(row.pk) for row in claims),
    }


def _with_feasibility_all(
    claims: list[ClaimRequest], clusters: list[Cluster]
) -> list[ClaimRequest]:
    """A page of claims with their feasibility: clusters and allocations read once per page,
    the words once for the claims that ask alike."""
    selectors.with_clusters(claims, clusters)
    quota.with_team_use(claims)
    taken = feasibility.allocated_on({claim.namespace_request.cluster_id for claim in claims})
    known: feasibility.Known = {}
    worded: dict[feasibility.Feasibility, Feasible] = {}
    return [_with_feasibility(claim, taken, known, worded) for claim in claims]


def _with_feasibility(
    claim: ClaimRequest,
    taken: feasibility.Taken | None = None,
    known: feasibility.Known | None = None,
    worded: dict[feasibility.Feasibility, Feasible] | None = None,
) -> ClaimRequest:
    """The approver sees whether a pending claim can ever be met, and what is free now."""
    if claim.state == ClaimRequest.State.PENDING:
        found = feasibility.of_claim(claim, taken, known)
        worded = {} if worded is None else worded
        if found not in worded:
            worded[found] = Feasible.of(found)
        claim.feasibility = worded[found]  # type: ignore[attr-defined]
    return claim


@dataclass(frozen=True)
class Feasible:
    """A pending claim's feasibility in the queue's words: the summary under its devices and
    the picker's line by its decision. Worded in Python once per page, not per row."""

    possible: bool
    summary: str
    line: str

    @classmethod
    def of(cls, found: feasibility.Feasibility) -> Feasible:
        words = [found.line()]
        if found.best_node:
            words.append(" " + _("(most free on %(node)s)") % {"node": found.best_node})
        if not found.possible:
            words.append(": " + _("cannot be satisfied"))
        elif not found.fits_now:
            words.append(": " + _("not enough free now"))
        words.append(".")
        if not found.selector_evaluated:
            words.append(" " + _("Counted by class: the selector could not be evaluated here."))
        return cls(possible=found.possible, summary=found.summary(), line="".join(words))


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
    _with_links([item], type(item))
    if isinstance(item, ClaimRequest):
        _with_feasibility(item)
        if item.state == ClaimRequest.State.PENDING:
            quota.with_team_use([item])  # a page has it from _with_feasibility_all
    context = {name: item, "reject_form": reject_form, "decision_error": decision_error}
    # Only the row: the live queue redraws the rest (the namespace row a claim's approval
    # approved, the menu's count). Out-of-band parts here would miss their target whenever
    # that redraw replaced this row first (htmx then looks for them in the detached row).
    return HttpResponse(render_to_string(template, context, request=request))
