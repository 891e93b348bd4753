"""Starting a workload on a claim (with the manifests it will apply, as the claim form shows
its claim), a workload's page (how to reach a notebook), and stopping it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from claims.domain import services
from claims.domain.services.workloads import build_workload, claim_problem
from claims.kube import manifests, names
from claims.live import changes
from claims.models import ClaimRequest, WorkloadKind, WorkloadLog, WorkloadProfile
from claims.policy import workloads as checks
from claims.read import kueue, planned, queue, selectors
from claims.web.views import live
from claims.web.views.claims import run_elapsed, run_phases
from claims.web.views.common import (
    HtmxHttpRequest,
    already_submitted,
    call_for_button,
    login_required,
    remember_submission,
)
from claims.web.workload_forms import WorkloadForm

WORKLOAD_NAME_PLACEHOLDER = "id"


def _form(request: HtmxHttpRequest, data: Any = None) -> WorkloadForm:
    profiles = WorkloadProfile.objects.filter(active=True)
    initial = {"profile": request.GET.get("profile")} if data is None else None
    return WorkloadForm(data, profiles=profiles, initial=initial)


def _changes(form: WorkloadForm) -> dict[str, Any]:
    """What the user changed of the profile: an empty field keeps the profile's."""
    data = form.cleaned_data
    return {
        "profile": data.get("profile"),
        "image": data.get("image") or None,
        "command": data.get("command") or None,
        "args": data.get("args") or None,
        "env": checks.parse_env_lines(data.get("env") or "") or None,
    }


@login_required
@require_http_methods(["GET", "POST"])
def workload_start(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    form = _form(request, request.POST or None)
    if request.method == "POST" and form.is_valid():
        token = form.cleaned_data["submission_token"]
        existing = already_submitted(request, token)
        if existing:
            return redirect("workload", existing)
        try:
            workload = services.workload_start(
                user=request.user, claim_request=claim, **_changes(form)
            )
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            remember_submission(request, token, workload.pk)
            messages.success(request, _("Workload started; it is being applied."))
            return redirect("workload", workload.pk)
    context = {
        "claim": claim,
        "form": form,
        "claim_problem": claim_problem(claim),
        **_preview_context(claim, form),
    }
    return render(request, "claims/workload_form.html", context)


@login_required
@require_POST
def workload_preview(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    claim = selectors.claim_request_get(user=request.user, pk=pk)
    form = _form(request, request.POST)
    return render(request, "claims/workload_form.html#preview", _preview_context(claim, form))


def _preview_context(claim: ClaimRequest, form: WorkloadForm) -> dict[str, Any]:
    """The manifests the form would apply, as far as its input allows, or what is wrong."""
    if not form.is_bound:
        form = WorkloadForm(
            {**form.initial, "profile": form.initial.get("profile") or _first(form)},
            profiles=WorkloadProfile.objects.filter(active=True),
        )
    if not form.is_valid() and "profile" in form.errors:
        return {"preview_problem": _("Choose a profile to see its manifests.")}
    try:
        unsaved = build_workload(claim=claim, **_changes(form))
    except ValidationError as error:
        problems = [m for messages_ in error.message_dict.values() for m in messages_]
        return {"preview_problem": " ".join(problems)}
    suffix = "job" if unsaved.kind == WorkloadKind.JOB else "nb"
    unsaved.name = names.label(claim.name, suffix=f"-{suffix}-{WORKLOAD_NAME_PLACEHOLDER}")
    queue = planned.kueue_queue_of(unsaved) if claim.cluster.kueue else ""  # Kueue's to admit
    documents = planned.workload_manifests(
        unsaved, preview=True, suspend=bool(queue), kueue_queue=queue
    )
    return {"preview_yaml": "---\n".join(manifests.to_yaml(d) for d in documents)}


def _first(form: WorkloadForm) -> Any:
    choices = list(form.fields["profile"].choices)  # type: ignore[attr-defined]
    return choices[0][0] if choices else None


WORKLOAD_PAGE = live.LivePage(
    "claims/workload_detail.html", "workload", parts=("status", "access", "events")
)


@login_required
def workload_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    selectors.workload_get(user=request.user, pk=pk)  # 404 before any wait
    return live.respond(
        request,
        WORKLOAD_PAGE,
        live.Live(
            version=lambda: changes.workload_version(pk),
            channels=[changes.channel("workload", pk)],
            context=lambda: _detail_context(request, pk),
        ),
    )


def _detail_context(request: HtmxHttpRequest, pk: int) -> dict[str, Any]:
    workload = selectors.workload_get(user=request.user, pk=pk)
    documents = (
        planned.workload_manifests(
            workload, suspend=bool(workload.kueue_queue), kueue_queue=workload.kueue_queue
        )
        if workload.name
        else []
    )
    events = list(selectors.events_for(workload))
    log = WorkloadLog.objects.filter(workload=workload).first()
    return {
        "workload": workload,
        "claim": workload.claim,
        "access": services.notebook_access(user=request.user, workload=workload),
        "manifests_yaml": "---\n".join(manifests.to_yaml(d) for d in documents),
        "events": events,
        "phases": run_phases(events, workload),
        "elapsed": run_elapsed(workload),
        "logs": [log or WorkloadLog(workload=workload)],
        "live_final": workload.is_final,
        "queue_spot": queue.spot_of(workload.claim) if not workload.is_final else None,
        "kueue": kueue.kueue_line(workload) if not workload.is_final else None,
    }


@login_required
@require_GET
def workload_log(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Its log as a file (what the portal kept: the tail of a very long one)."""
    workload = selectors.workload_get(user=request.user, pk=pk)
    log = WorkloadLog.objects.filter(workload=workload).first()
    response = HttpResponse(log.text if log else "", content_type="text/plain; charset=utf-8")
    filename = f"{workload.name or f'workload-{workload.pk}'}.log"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_POST
def workload_run_again(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    workload = selectors.workload_get(user=request.user, pk=pk)
    try:
        again = services.workload_run_again(user=request.user, workload=workload)
    except ValidationError as error:
        for problems in error.message_dict.values():
            for problem in problems:
                messages.error(request, problem)
        return redirect("workload", workload.pk)
    messages.success(request, _("Started again; it is being applied."))
    return redirect("workload", again.pk)


@login_required
@require_http_methods(["GET", "POST"])
def workload_stop(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    workload = selectors.workload_get(user=request.user, pk=pk)
    if request.method != "POST":
        return render(request, "claims/confirm_workload_stop.html", {"workload": workload})
    done = _("Stopped; its objects are being deleted.")
    call_for_button(
        request, lambda: services.workload_stop(user=request.user, workload=workload), done=done
    )
    return redirect("workload", workload.pk)
