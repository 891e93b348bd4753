"""Admins register, change, re-check and remove clusters (the list and detail pages are in
claims.web.views.clusters). A kubeconfig is read from the upload or the paste, encrypted by
claims.clusters.credentials, and never shown again."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from claims.clusters import credentials
from claims.clusters import registry as cluster_registry
from claims.clusters.registry import IN_CLUSTER, KUBECONFIG, ClusterInput
from claims.models import Cluster
from claims.templatetags.portal import user_message
from claims.web.views.common import HtmxHttpRequest, login_required

KUBECONFIG_MAX_BYTES = 262144
SOURCES = [
    (KUBECONFIG, gettext_lazy("A kubeconfig (uploaded or pasted; stored encrypted)")),
    (IN_CLUSTER, gettext_lazy("The portal's own service account (in-cluster)")),
]
NOT_SHOWN = gettext_lazy("For safety a kubeconfig is never shown again: upload or paste it again.")


def admin_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm("claims.change_cluster"):
            raise PermissionDenied(gettext("Only an admin manages clusters."))
        return view(request, *args, **kwargs)

    return wrapper


class ClusterForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy("How users see it, e.g. berlin-a100."),
    )
    source = forms.ChoiceField(
        choices=SOURCES,
        initial=KUBECONFIG,
        widget=forms.RadioSelect,
        label=gettext_lazy("Connect with"),
    )
    kubeconfig_file = forms.FileField(required=False, label=gettext_lazy("Kubeconfig file"))
    kubeconfig_text = forms.CharField(
        required=False,
        label=gettext_lazy("… or paste it"),
        max_length=KUBECONFIG_MAX_BYTES,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "autocomplete": "off"}),
    )
    context = forms.CharField(
        required=False,
        widget=forms.Select,
        label=gettext_lazy("Context"),
        help_text=gettext_lazy("One of the kubeconfig's contexts; default: its current context."),
    )

    prometheus_url = forms.CharField(
        required=False,
        max_length=500,
        label=gettext_lazy("Prometheus URL"),
        help_text=gettext_lazy(
            "The Prometheus that scrapes this cluster's dcgm-exporters, e.g. "
            "http://prometheus.monitoring:9090; empty: the portal's PROMETHEUS_URL."
        ),
    )
    prometheus_selector = forms.CharField(
        required=False,
        max_length=500,
        label=gettext_lazy("Its series"),
        help_text=gettext_lazy(
            'PromQL label matchers that select this cluster\'s series, e.g. cluster="lab"; '
            "empty: by its nodes' names when the Prometheus serves other clusters too."
        ),
    )

    def __init__(self, *args: Any, contexts: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.set_contexts(contexts or [])

    def set_contexts(self, names: list[str]) -> None:
        widget = cast(forms.Select, self.fields["context"].widget)
        widget.choices = [("", "—")] + [(name, name) for name in names]

    def clean_kubeconfig_file(self) -> str:
        upload = self.cleaned_data.get("kubeconfig_file")
        if not upload:
            return ""
        if upload.size > KUBECONFIG_MAX_BYTES:
            raise ValidationError(
                gettext("This file is too large for a kubeconfig (256 KiB at most).")
            )
        try:
            return upload.read().decode()
        except UnicodeDecodeError:
            raise ValidationError(
                gettext("This file is not text (a kubeconfig is YAML).")
            ) from None

    def kubeconfig(self) -> str:
        return self.cleaned_data.get("kubeconfig_file") or self.cleaned_data.get(
            "kubeconfig_text", ""
        )

    def cluster_input(self) -> ClusterInput:
        data, text = self.cleaned_data, self.kubeconfig()
        context = data.get("context", "")
        if text and not context and data["source"] == KUBECONFIG:
            context = credentials.default_context(text)
        return ClusterInput(
            data["name"].strip(),
            data["source"],
            text,
            context,
            data.get("prometheus_url", ""),
            data.get("prometheus_selector", ""),
        )


def _stored_contexts(cluster: Cluster | None) -> list[str]:
    kubeconfig = credentials.kubeconfig_of(cluster) if cluster else None
    return credentials.context_names(kubeconfig) if kubeconfig else []


def _add_errors(form: ClusterForm, error: ValidationError) -> None:
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, errors in error.message_dict.items():
        target = "kubeconfig_text" if field == "kubeconfig" else field
        form.add_error(target if target in form.fields else None, errors)


def _saved(request: HtmxHttpRequest, form: ClusterForm, cluster: Cluster | None) -> Any:
    """The saved cluster, or None with the errors on the form."""
    if not form.is_valid():
        return None
    try:
        return cluster_registry.save_cluster(form.cluster_input(), cluster)
    except ValidationError as error:
        _add_errors(form, error)
    except ImproperlyConfigured as error:
        form.add_error(None, str(error))
    return None


def _report_contact(request: HtmxHttpRequest, cluster: Cluster) -> None:
    outcome = cluster_registry.contact(cluster)
    if outcome.refused:
        names = {"name": cluster.name, "missing": ", ".join(outcome.missing)}
        if outcome.missing:
            refused = gettext("%(name)s answered, but the portal's identity may not: %(missing)s.")
        else:
            refused = gettext("%(name)s answered, but refused the portal: %(problem)s.")
        messages.warning(request, refused % {**names, "problem": outcome.problem})
    elif outcome.reachable:
        failed = [user_message(check.name) for check in outcome.preflight if not check.ok]
        numbers = {
            "ok": len(outcome.preflight) - len(failed),
            "all": len(outcome.preflight),
            "failed": ", ".join(failed),
        }
        summary = gettext("preflight: %(ok)d/%(all)d ok") % numbers
        summary += " " + gettext("(failed: %(failed)s)") % numbers if failed else ""
        answered = gettext("%(name)s answered; %(summary)s.")
        messages.success(request, answered % {"name": cluster.name, "summary": summary})
    else:
        unreachable = gettext("%(name)s is unreachable: %(problem)s.")
        messages.warning(request, unreachable % {"name": cluster.name, "problem": outcome.problem})


def _form_page(
    request: HtmxHttpRequest, form: ClusterForm, cluster: Cluster | None
) -> HttpResponse:
    context = {"nav": "clusters", "form": form, "cluster": cluster, "not_shown": NOT_SHOWN}
    status = 400 if form.is_bound else 200
    return render(request, "claims/cluster_form.html", context, status=status)


@sensitive_post_parameters("kubeconfig_text")
@admin_required
def cluster_register(request: HtmxHttpRequest) -> HttpResponse:
    form = ClusterForm()
    if request.method == "POST":
        form = ClusterForm(request.POST, request.FILES)
        cluster = _saved(request, form, None)
        if cluster is not None:
            messages.success(
                request, gettext("Registered cluster %(name)s.") % {"name": cluster.name}
            )
            _report_contact(request, cluster)
            return redirect("clusters")
        form.set_contexts(_posted_contexts(form))
    return _form_page(request, form, None)


@sensitive_post_parameters("kubeconfig_text")
@admin_required
def cluster_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    contexts = _stored_contexts(cluster)
    source = IN_CLUSTER if cluster.in_cluster else KUBECONFIG
    initial = {
        "name": cluster.name,
        "source": source,
        "context": cluster.context,
        "prometheus_url": cluster.prometheus_url,
        "prometheus_selector": cluster.prometheus_selector,
    }
    form = ClusterForm(initial=initial, contexts=contexts)
    if request.method == "POST":
        form = ClusterForm(request.POST, request.FILES, initial=initial, contexts=contexts)
        saved = _saved(request, form, cluster)
        if saved is not None:
            messages.success(request, gettext("Saved cluster %(name)s.") % {"name": saved.name})
            _report_contact(request, saved)
            return redirect("clusters")
        form.set_contexts(_posted_contexts(form) or contexts)
    return _form_page(request, form, cluster)


def _posted_contexts(form: ClusterForm) -> list[str]:
    """The contexts of the kubeconfig just sent (names only, for the picker)."""
    text = form.cleaned_data.get("kubeconfig_file") or form.data.get("kubeconfig_text", "")
    try:
        return credentials.context_names(credentials.parse_kubeconfig(text))
    except ValidationError:
        return []


@sensitive_post_parameters("kubeconfig_text")
@admin_required
@require_POST
def cluster_contexts(request: HtmxHttpRequest) -> HttpResponse:
    """The context picker for the kubeconfig being uploaded or pasted (htmx)."""
    form = ClusterForm(request.POST, request.FILES)
    form.is_valid()
    names, text = _posted_contexts(form), form.kubeconfig()
    form = ClusterForm(initial={"context": credentials.default_context(text)})
    form.set_contexts(names)
    html = render_to_string(
        "claims/cluster_form.html#context", {"form": form, "found": names}, request=request
    )
    return HttpResponse(html)


@admin_required
@require_POST
def cluster_recheck(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    _report_contact(request, cluster)
    return redirect("clusters")


@admin_required
def cluster_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    if request.method == "POST":
        try:
            cluster_registry.remove_cluster(cluster)
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
            return redirect("clusters")
        messages.success(request, gettext("Removed cluster %(name)s.") % {"name": cluster.name})
        return redirect("clusters")
    context = {
        "nav": "clusters",
        "cluster": cluster,
        "remove": True,
        "live": cluster_registry.live_requests(cluster),
        "past": cluster_registry.past_requests(cluster),
    }
    return render(request, "claims/cluster_form.html", context)
