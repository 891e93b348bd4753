"""The dashboard and the two request forms (namespace, GPU claim with its live preview)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from claims.domain import services
from claims.kube import labels as label_keys
from claims.kube import manifests
from claims.live import changes
from claims.models import ClaimRequest, NamespaceRequest, VerificationRun
from claims.policy import device_picker, feasibility, validation
from claims.policy.device_picker import Picks
from claims.read import planned, queue, selectors
from claims.web.forms import ALTERNATIVE_FIELDS, ClaimRequestForm, NamespaceRequestForm
from claims.web.views.common import (
    HtmxHttpRequest,
    already_submitted,
    call_for_button,
    login_required,
    remember_submission,
    render_live,
)

DASHBOARD_ROWS = 50
BUSY_POLL_SECONDS = 1
IDLE_POLL_SECONDS = 5


@login_required
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    seen = request.GET.get("seen") if request.htmx else None
    if seen and not _changed_while_waiting(request, seen):
        return HttpResponse(status=204)  # nothing changed: htmx keeps the page, asks again
    glance = selectors.dashboard_glance(user=user)
    fingerprint = glance.fingerprint
    namespaces = list(selectors.namespace_request_rows(user=user)[:DASHBOARD_ROWS])
    # Their allocations: a row lists the devices each claim holds.
    claims = list(selectors.claim_request_rows(user=user, with_allocation=True)[:DASHBOARD_ROWS])
    runs = list(selectors.verification_run_rows(user=user)[:DASHBOARD_ROWS])
    all_final = (
        all(ns.state in NamespaceRequest.FINAL_STATES for ns in namespaces)
        and all(claim.state in ClaimRequest.FINAL_STATES for claim in claims)
        and all(run.state in VerificationRun.FINAL_STATES for run in runs)
    )
    context = {
        "nav": "dashboard",
        "everyone": selectors.user_is_approver(user),
        "namespaces": namespaces,
        "claims": claims,
        "runs": runs,
        "fingerprint": fingerprint,
        # Work in progress changes by the second; otherwise only new things, made in another
        # tab or by someone else, can appear: look for those less often.
        "poll_seconds": IDLE_POLL_SECONDS if all_final else BUSY_POLL_SECONDS,
        "deletable_states": ("pending", "approved", "active", "failed"),
        "approvals_waiting": glance.approvals_waiting,
        "queue_counts": queue.counts(),
    }
    return render_live(request, "claims/dashboard.html", context, final=False)


def _changed_while_waiting(request: HtmxHttpRequest, seen: str) -> bool:
    """Whether what the dashboard shows differs from `seen` now or within LIVE_WAIT_SECONDS,
    as announced on the owner's channel (an approver's dashboard shows everyone's). Without a
    free waiting slot it only looks now (the page asks again at its next poll)."""
    user = request.user
    everyone = selectors.user_is_approver(user)
    watched = changes.EVERYTHING if everyone else changes.channel("user", user.pk)

    def changed() -> bool:
        return selectors.dashboard_glance(user=user).fingerprint != seen

    waited = changes.wait_in_turn(user.pk, [watched], changed, seconds=settings.LIVE_WAIT_SECONDS)
    return changed() if waited is None else waited


@login_required
def namespace_request_create(request: HtmxHttpRequest) -> HttpResponse:
    form = NamespaceRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        token = form.cleaned_data["submission_token"]
        if already_submitted(request, token):
            messages.info(request, _("You already submitted this namespace request."))
            return redirect("dashboard")
        try:
            ns = services.namespace_request_submit(
                ask_cluster=True,
                user=request.user,
                cluster=form.cleaned_data["cluster"],
                name=form.cleaned_data["name"],
                purpose=form.cleaned_data["purpose"],
            )
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            remember_submission(request, token, ns.pk)
            messages.success(
                request,
                _("Namespace %(name)s requested; an approver decides next.") % {"name": ns.name},
            )
            return redirect("dashboard")
    return render(request, "claims/namespace_form.html", {"nav": "namespace", "form": form})


@login_required
def claim_request_create(request: HtmxHttpRequest) -> HttpResponse:
    form = ClaimRequestForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        token = form.cleaned_data["submission_token"]
        existing = already_submitted(request, token)
        if existing:
            messages.info(request, _("You already submitted this claim request; here it is."))
            return redirect("claim", existing)
        try:
            claim = _submit_claim(request, form)
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            remember_submission(request, token, claim.pk)
            messages.success(
                request,
                _("Claim %(name)s requested; an approver decides next.") % {"name": claim.name},
            )
            return redirect("claim", claim.pk)
    context = {"nav": "claim", "form": form, **_preview_context(form)}
    return render(request, "claims/claim_form.html", context)


CLAIM_FIELDS = ("namespace_request", "name", "device_class", "count", "all_devices")
PICKER_FIELDS = ("selector", "gpu_model", "min_memory", "mig_profile", "purpose")


def _submit_claim(request: HtmxHttpRequest, form: ClaimRequestForm) -> ClaimRequest:
    data = form.cleaned_data
    fields = {name: data[name] for name in (*CLAIM_FIELDS, *PICKER_FIELDS)}
    alternatives = form.further_alternatives()
    return services.claim_request_submit(
        user=request.user, ask_cluster=True, alternatives=alternatives, **fields
    )


@login_required
@require_POST
def claim_request_preview(request: HtmxHttpRequest) -> HttpResponse:
    form = ClaimRequestForm(request.POST, user=request.user)
    context = {**_preview_context(form), "oob": True}
    return render(request, "claims/claim_form.html#preview", context)


def _preview_context(form: ClaimRequestForm) -> dict[str, Any]:
    """The ResourceClaim the form would produce, as far as the input allows, and what the
    picker offers and matches on the chosen namespace's cluster."""
    raw = form.data if form.is_bound else form.initial
    namespace = _chosen_namespace(form, raw.get("namespace_request"))
    name = (raw.get("name") or "").strip()
    device_class = raw.get("device_class") or _first_class(form)
    if namespace is None:
        return {"preview_problem": _("Choose a namespace to see the manifest.")}
    cluster = namespace.cluster
    unsaved = _unsaved_claim(namespace, name, device_class, raw)
    unsaved.further_alternatives = _preview_alternatives(form, raw, unsaved.selector)
    picker = _picker_context(unsaved)
    if not name or not device_class:
        return {**picker, "preview_problem": _("Enter a claim name and choose a device class.")}
    manifest = planned.planned_claim_manifest(unsaved)
    # The claim has no id before it is submitted; say so rather than show "None".
    manifest["metadata"]["labels"][label_keys.CLAIM_REQUEST] = ""
    return {
        **picker,
        "preview_yaml": manifests.to_yaml(manifest),
        "preview_version": cluster.preferred_resource_version or "v1",
        "preview_cluster": cluster.name,
        # What the user typed: its line and column are where they look (not the picker's).
        **validation.selector_preview(cluster, device_class, (raw.get("selector") or "").strip()),
    }


def _first_class(form: ClaimRequestForm) -> str:
    choices = list(form.fields["device_class"].widget.choices)
    return str(choices[0][0]) if choices else ""


def _picker_context(claim: ClaimRequest) -> dict[str, Any]:
    """The picker's lists, its CEL, and the feasibility line of the whole selector (the
    picks the cluster cannot honour are left out of it and said)."""
    cluster = claim.namespace_request.cluster
    offered = device_picker.options(cluster.inventory, claim.device_class)
    picks = Picks(claim.gpu_model, claim.min_memory, claim.mig_profile)
    problems = device_picker.problems(picks, offered)
    usable = Picks(**{k: v for k, v in asdict(picks).items() if k not in problems})
    generated = device_picker.selector_for(usable, offered.domain)
    claim.selector = device_picker.combined(generated, claim.selector)
    return {
        "picker_options": offered,
        "picker_problems": problems,
        "generated_selector": generated,
        "preview_feasibility": feasibility.of_claim(claim) if claim.device_class else None,
        **_alternatives_feasibility(claim),
    }


def _preview_alternatives(form: ClaimRequestForm, raw: Any, written: str) -> list[dict[str, Any]]:
    """The alternatives after the first as far as the input allows: picks the cluster does
    not publish are left out of their selector (the submit says why)."""
    cluster = _chosen_namespace(form, raw.get("namespace_request"))
    inventory = cluster.cluster.inventory if cluster else {}
    found = []
    for position in range(2, validation.MAX_ALTERNATIVES + 1):
        row = {f: raw.get(validation.alternative_key(position, f)) for f in ALTERNATIVE_FIELDS}
        device_class = str(row["device_class"] or "").strip()
        if not device_class:
            continue
        picks = Picks(*(str(row[f] or "").strip() for f in ALTERNATIVE_FIELDS[1:4]))
        offered = device_picker.options(inventory, device_class)
        problems = device_picker.problems(picks, offered)
        usable = Picks(**{k: v for k, v in asdict(picks).items() if k not in problems})
        generated = device_picker.selector_for(usable, offered.domain)
        every = str(row["all_devices"] or "").lower() in ("on", "true", "1")
        found.append(
            {
                "device_class": device_class,
                **asdict(picks),
                "count": None if every else _as_count(row["count"]),
                "all_devices": every,
                "selector": device_picker.combined(generated, written),
            }
        )
    return found


def _alternatives_feasibility(claim: ClaimRequest) -> dict[str, Any]:
    """Each alternative's feasibility line and which one the scheduler would take now."""
    if not claim.further_alternatives or not claim.device_class:
        return {}
    found = feasibility.of_alternatives(claim)
    first = feasibility.first_fitting(found)
    lines = [(planned.alternative_label(claim, n), f) for n, f in enumerate(found, start=1)]
    return {
        "alternatives_feasibility": lines,
        "first_fitting": planned.alternative_label(claim, first) if first else "",
    }


def _unsaved_claim(
    namespace: NamespaceRequest, name: str, device_class: str, raw: Any
) -> ClaimRequest:
    return ClaimRequest(
        namespace_request=namespace,
        name=name,
        device_class=device_class,
        count=_as_count(raw.get("count")),
        all_devices=str(raw.get("all_devices", "")).lower() in ("on", "true", "1"),
        selector=(raw.get("selector") or "").strip(),
        gpu_model=(raw.get("gpu_model") or "").strip(),
        min_memory=(raw.get("min_memory") or "").strip(),
        mig_profile=(raw.get("mig_profile") or "").strip(),
    )


def _chosen_namespace(form: ClaimRequestForm, value: Any) -> NamespaceRequest | None:
    queryset = form.namespace_choices
    if value in (None, ""):
        return queryset.first()
    try:
        return queryset.filter(pk=int(value)).first()
    except (TypeError, ValueError):
        return None


def _as_count(value: Any) -> int:
    try:
        return int(value)  # 0 stays 0: the preview flags it, as submit does
    except (TypeError, ValueError):
        return 1


@login_required
@require_POST
def namespace_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _namespace_action(request, pk, services.namespace_request_retry, _("Creating it again."))


@login_required
@require_POST
def namespace_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    done = _("Deleting it, with the claims in it.")
    return _namespace_action(request, pk, services.namespace_request_delete, done)


def _namespace_action(
    request: HtmxHttpRequest, pk: int, action: Callable[..., Any], done: str
) -> HttpResponse:
    ns = selectors.namespace_request_get(user=request.user, pk=pk)
    subject = _("Namespace %(name)s: ") % {"name": ns.name}
    call_for_button(
        request, lambda: action(user=request.user, namespace_request=ns), done=done, subject=subject
    )
    return redirect("dashboard")
