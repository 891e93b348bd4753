"""A claim's page (live state, allocation, runs, manifests) and its actions; a run's page."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from claims.domain import services
from claims.domain.services import workloads as workload_services
from claims.kube import manifests
from claims.live import changes
from claims.models import AuditEvent, ClaimRequest, RunLog, VerificationRun, Workload
from claims.read import planned, queue, selectors, utilisation
from claims.web.views import confirm, live
from claims.web.views.clusters import claim_map_context, run_pending_context
from claims.web.views.common import (
    HtmxHttpRequest,
    call_for_button,
    login_required,
    refusal_messages,
)

CS = ClaimRequest.State
RS = VerificationRun.State
USAGE_STATES = (CS.WAITING, CS.IN_USE)  # a claim whose Pods may run on GPUs


CLAIM_PAGE = live.LivePage(
    "claims/claim_detail.html",
    "claim",
    parts=("status", "allocation", "runs", "workloads", "timeline"),
)
RUN_PAGE = live.LivePage("claims/run_detail.html", "run", parts=("actions", "result"))


@login_required
def claim_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    selectors.claim_request_get(user=request.user, pk=pk)  # 404 before any wait
    return live.respond(
        request,
        CLAIM_PAGE,
        live.Live(
            version=lambda: changes.claim_version(pk),
            channels=[changes.channel("claim", pk)],
            context=lambda: _claim_context(request, pk),
        ),
    )


def _claim_context(request: HtmxHttpRequest, pk: int) -> dict[str, Any]:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    runs = list(claim.runs.all())
    final = claim.state in ClaimRequest.FINAL_STATES
    run_going = any(run.state not in VerificationRun.FINAL_STATES for run in runs)
    context = {
        "claim": claim,
        "runs": runs,
        "events": selectors.events_for(claim),
        "live_final": final,
        "can_verify": claim.state in (CS.WAITING, CS.IN_USE) and not run_going,
        "workloads": list(claim.workloads.all()),
        "can_start_workload": workload_services.claim_problem(claim) is None,
        "can_release": not final,
        "can_retry": claim.state == CS.FAILED,
        "usage": utilisation.claim_usage(claim) if claim.state in USAGE_STATES else None,
        "queue_spot": queue.spot_of(claim),
        "can_move_in_queue": selectors.user_is_approver(request.user),
    }
    if "since" not in request.GET:  # the manifests are outside the live parts
        context.update(_manifest_context(claim))
    context.update(claim_map_context(claim, request.user))
    return context


def _manifest_context(claim: ClaimRequest) -> dict[str, Any]:
    """The manifests as applied (or as they will be), the kubectl command, the Pod snippet."""
    ns = claim.namespace_request
    applied = claim.applied_manifest or planned.planned_claim_manifest(claim)
    claim_manifest = in_kubernetes_order(applied)
    documents = [
        manifests.to_yaml(planned.namespace_manifest(ns.name, ns.labels())),
        manifests.to_yaml(claim_manifest),
    ]
    kubectl = (
        "kubectl apply --server-side --field-manager=gpu-portal -f - <<'EOF'\n"
        + "---\n".join(documents)
        + "EOF"
    )
    return {
        "manifest_api_version": claim_manifest["apiVersion"],
        "kubectl_apply": kubectl,
        "pod_snippet_yaml": manifests.to_yaml(manifests.pod_spec_snippet(claim.name)),
    }


# PostgreSQL's jsonb does not keep key order; show manifests the way people write them.
KEY_ORDER = ("apiVersion", "kind", "metadata", "name", "namespace", "labels", "spec")


def in_kubernetes_order(value: Any) -> Any:
    if isinstance(value, list):
        return [in_kubernetes_order(item) for item in value]
    if not isinstance(value, dict):
        return value
    rank = {key: index for index, key in enumerate(KEY_ORDER)}
    keys = sorted(value, key=lambda key: (rank.get(key, len(rank)), key))
    return {key: in_kubernetes_order(value[key]) for key in keys}


@login_required
@require_http_methods(["GET", "POST"])
def claim_release(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET asks to confirm (what the release stops and frees, a log it loses); the POST from
    there releases. Another POST asks first when a run's log is still unread."""
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    confirmed = request.POST.get("confirmed") == "1"
    if request.method != "POST" or (not confirmed and selectors.runs_with_unread_logs(claim)):
        return confirm.confirm_claim_release(request, claim)
    release = functools.partial(services.claim_request_release, force=True)
    return _claim_action(request, pk, release, _("Claim released."))


@login_required
@require_POST
def claim_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _claim_action(request, pk, services.claim_request_retry, _("Applying the claim again."))


@login_required
@require_POST
def claim_queue_move(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An approver moves a waiting claim up or down in its queue, saying why."""
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    call_for_button(
        request,
        lambda: services.claim_request_queue_move(
            user=request.user,
            claim_request=claim,
            direction=request.POST.get("direction", ""),
            reason=request.POST.get("reason", ""),
        ),
        done=_("Moved in the queue."),
    )
    return redirect("claim", claim.pk)


@login_required
@require_POST
def claim_verify(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    try:
        run = services.verification_run_start(user=request.user, claim_request=claim)
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, " ".join(refusal_messages(error)))
        return redirect("claim", claim.pk)
    return redirect("run", run.pk)


def _claim_action(
    request: HtmxHttpRequest, pk: int, action: Callable[..., Any], done: str
) -> HttpResponse:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    call_for_button(request, lambda: action(user=request.user, claim_request=claim), done=done)
    return redirect("claim", claim.pk)


@login_required
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    selectors.verification_run_get(user=request.user, pk=pk)  # 404 before any wait
    return live.respond(
        request,
        RUN_PAGE,
        live.Live(
            version=lambda: changes.run_version(pk),
            channels=[changes.channel("run", pk)],
            context=lambda: _run_context(request, pk),
        ),
    )


def _run_context(request: HtmxHttpRequest, pk: int) -> dict[str, Any]:
    run = selectors.verification_run_get(user=request.user, pk=pk)
    logs = {log.container: log for log in run.logs.all()}
    return {
        "run": run,
        "elapsed": run_elapsed(run),
        "phases": run_phases(list(selectors.events_for(run)), run),
        "logs": [logs.get(name) or RunLog(container=name) for name in VerificationRun.CONTAINERS],
        # A finished run whose logs are read again still changes: keep the page following it.
        "live_final": run.is_final and not run.log_retry_until,
        # Its Pod waits to be created while its claim waits its turn (claims/worker/queue_turn).
        "queue_spot": queue.spot_of(run.claim) if run.state == RS.QUEUED else None,
        **run_pending_context(run, request.user),
    }


@dataclass(frozen=True)
class Phase:
    event: AuditEvent
    seconds: float | None  # how long the run stayed in it; None for the state it ends in


def run_phases(events: list[AuditEvent], run: VerificationRun | Workload) -> list[Phase]:
    """Each state the run went through (its audit rows), with how long it lasted; the
    current state of a run still going lasts until now."""
    ends: list[datetime | None] = [event.created for event in events[1:]]
    ends.append(None if run.is_final else timezone.now())
    return [
        Phase(event, None if end is None else (end - event.created).total_seconds())
        for event, end in zip(events, ends, strict=False)  # no events: no phases
    ]


def run_elapsed(run: VerificationRun | Workload) -> timedelta:
    """From the start of the Pod to its end (or now), or since it was queued when not started."""
    start = run.started_at or run.created
    end = run.finished_at or timezone.now()
    return max(end - start, timedelta(0))


@login_required
@require_http_methods(["GET", "POST"])
def run_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = selectors.verification_run_get(user=request.user, pk=pk)
    if request.method != "POST":
        return confirm.confirm_run_cancel(request, run)
    done = _("Run cancelled; its Pod is being deleted, which frees the GPU.")
    call_for_button(
        request, lambda: services.verification_run_cancel(user=request.user, run=run), done=done
    )
    return redirect("run", run.pk)
