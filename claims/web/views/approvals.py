"""The approval queue: approvers approve or reject in place (the row is swapped by htmx)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.models import Count, Max, QuerySet, Value
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from claims.domain import services
from claims.live import changes
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.policy import feasibility, limits, quota, rules
from claims.read import approval_queue, keyset, selectors
from claims.read import queue as queue_read
from claims.web.forms import ApprovalFilterForm, RejectForm
from claims.web.views import live
from claims.web.views.common import HtmxHttpRequest, login_required

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


APPROVALS_PAGE = live.LivePage(
    "claims/approvals.html", "approvals", parts=("count", "namespaces", "claims")
)
# Parameters of the watcher's own (the version, a token per part, the rows shown so far).
WATCH_PARAMS = ("since", "shown_ns", "shown_claims", *APPROVALS_PAGE.parts)
# Where each kind's page starts or ends: ?claim_after=<position> or ?claim_before=.
PAGED = {NamespaceRequest: "ns", ClaimRequest: "claim"}
SHOWN = {NamespaceRequest: "shown_ns", ClaimRequest: "shown_claims"}


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
    form = ApprovalFilterForm(request.GET, user=request.user)
    shown = form.queue_filter()
    queue = approval_queue.approval_queue(user=request.user, shown=shown)
    ns_page = _page(request, queue["namespaces"], NamespaceRequest, shown.shows("namespace"))
    claim_page = _page(request, queue["claims"], ClaimRequest, shown.shows("claim"))
    ns_rows = _rows(ns_page, NamespaceRequest, request)
    claim_rows = _rows(claim_page, ClaimRequest, request)
    _with_links(ns_rows, NamespaceRequest)
    _with_links(claim_rows, ClaimRequest)
    _with_four_eyes(request.user, [*ns_rows, *claim_rows])
    filters = {key: value for key, value in request.GET.items() if key not in WATCH_PARAMS}
    waiting = approval_queue.approval_count(request.user)
    return {
        "nav": "approvals",
        "form": form,
        "shown": shown,
        "namespace_page": ns_page,
        "claim_page": claim_page,
        "unknown_page": _unknown_position(request),
        "namespace_rows": ns_rows,
        "claims": _with_feasibility_all(claim_rows, form.clusters),
        "waiting": waiting,
        "approvals_waiting": waiting,
        "queue_counts": queue_read.counts(),
        "all_clusters": form.clusters,
        "live_query": filters | _shown_ids(ns_rows, claim_rows),
        "reject_form": None,  # a row's, when a decision is redrawn (_row)
        "decision_error": "",
    }


def _page(
    request: HtmxHttpRequest, rows: QuerySet, model: type[Any], shown: bool
) -> keyset.Page | None:
    """The page of one kind the links ask for (the first without one); None when filtered
    out."""
    if not shown:
        return None
    at = _positions(request, PAGED[model])
    submitted = rules.with_submitters(rows, model)
    size = limits.APPROVALS_PAGE_SIZE
    return keyset.page_of(submitted, size=size, after=at.get("after"), before=at.get("before"))


def _positions(request: HtmxHttpRequest, prefix: str) -> dict[str, keyset.Position]:
    """?<prefix>_after= or _before=; none at all when one does not parse (the first page)."""
    raw = {edge: request.GET.get(f"{prefix}_{edge}", "") for edge in ("after", "before")}
    at = {edge: keyset.Position.parse(text) for edge, text in raw.items() if text}
    return {} if None in at.values() else cast(dict[str, keyset.Position], at)


def _unknown_position(request: HtmxHttpRequest) -> bool:
    return any(
        keyset.Position.parse(request.GET[name]) is None
        for prefix in PAGED.values()
        for name in (f"{prefix}_after", f"{prefix}_before")
        if request.GET.get(name)
    )


def _rows(page: keyset.Page | None, model: type[Any], request: HtmxHttpRequest) -> list[Any]:
    """The page's pending rows and the rows the approver saw on it before (decided since)."""
    if page is None:
        return []
    seen = request.GET.get(SHOWN[model])
    return _with_shown(request.user, page.rows, model, seen)


def _with_shown(user: Any, rows: list[Any], model: type[Any], shown: str | None) -> list[Any]:
    """The page's pending rows and the rows the approver saw before (decided since)."""
    given = (shown or "").split(",")
    ids = {int(pk) for pk in given if pk.isascii() and pk.isdecimal() and len(pk) < 19}
    ids -= {row.pk for row in rows}
    if not ids:
        return rows
    extra = approval_queue.seen_rows(user=user, model=model, ids=ids)
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


def _with_four_eyes(user: Any, rows: list[Any]) -> list[Any]:
    """Marks the pending rows the approver may not approve (their own: four-eyes) and
    whether nobody else may either, for the row to say so before anyone clicks. Who else
    may approve is asked once per owner and submitter, not per row."""
    alone: dict[tuple[int, int | None], bool] = {}
    for row in rows:
        if row.state != "pending":
            continue
        submitter = row.submitter if hasattr(row, "submitter") else rules.submitter_id(row)
        row.own = rules.is_own(user, row, submitter=submitter)
        key = (row.owner_id, submitter)
        if row.own and key not in alone:
            alone[key] = not rules.another_approver_exists(user, row, submitter=submitter)
        row.alone = row.own and alone[key]
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
    approval_queue.with_clusters(claims, clusters)
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
    """A pending claim's feasibility in the queue: the one statement the claim form shows too
    (Feasibility.summary), worded in Python once per page, not per row."""

    possible: bool | None  # None: the selector cannot be checked before the cluster tries it
    summary: str

    @classmethod
    def of(cls, found: feasibility.Feasibility) -> Feasible:
        return cls(possible=found.possible, summary=found.summary())


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
    except rules.SelfApproval as error:
        if not request.htmx:
            raise  # 403, saying why; the queue offered no Approve (a page older than that did)
        item.refresh_from_db()
        return _row(request, item, decision_error=str(error))  # htmx swaps no 403 in
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
    _with_four_eyes(request.user, [item])
    if isinstance(item, ClaimRequest):
        _with_feasibility(item)
        if item.state == ClaimRequest.State.PENDING:
            quota.with_team_use([item])  # a page has it from _with_feasibility_all
    context = {name: item, "reject_form": reject_form, "decision_error": decision_error}
    # Only the row: the live queue redraws the rest (the namespace row a claim's approval
    # approved, the menu's count). Out-of-band parts here would miss their target whenever
    # that redraw replaced this row first (htmx then looks for them in the detached row).
    return HttpResponse(render_to_string(template, context, request=request))
