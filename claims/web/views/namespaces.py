"""A namespace's page (state, claims, timeline, access for kubectl) and its kubeconfig."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from claims.domain import access
from claims.kube import names
from claims.kube.errors import KubeError, TransientKubeError
from claims.live import changes
from claims.models import NamespaceRequest, VerificationRun
from claims.read import keyset, selectors
from claims.web.views import live
from claims.web.views.common import HtmxHttpRequest, login_required

NS = NamespaceRequest.State
# Nothing on the page changes by itself any more: stop polling.
SETTLED_STATES = (NS.REJECTED, NS.DELETED, NS.FAILED)
DELETABLE_STATES = (NS.PENDING, NS.APPROVED, NS.ACTIVE, NS.FAILED)
RUNS_SHOWN = 50
# Claims per page of the namespace's claims, newest first (a namespace may hold thousands: the
# page reads one page by position, as fast at the oldest as at the newest; the API lists all).
CLAIMS_SHOWN = 25


NAMESPACE_PAGE = live.LivePage(
    "claims/namespace_detail.html",
    "namespace",
    parts=("status", "access", "claims", "runs", "timeline"),
)


@login_required
def namespace_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    selectors.namespace_request_get(user=request.user, pk=pk)  # 404 before any wait
    return live.respond(
        request,
        NAMESPACE_PAGE,
        live.Live(
            version=lambda: changes.namespace_version(pk),
            channels=[changes.channel("namespace", pk)],
            context=lambda: _namespace_context(request, pk),
        ),
    )


def _namespace_context(request: HtmxHttpRequest, pk: int) -> dict[str, Any]:
    ns = selectors.namespace_request_get(user=request.user, pk=pk)
    # ?claims_before=: a page of older claims (a position it did not make: the newest).
    before = keyset.Position.parse(request.GET.get("claims_before", ""))
    claims = selectors.claims_in_namespace(namespace_request=ns, size=CLAIMS_SHOWN, before=before)
    return {
        "ns": ns,
        # The same page at each live update (nothing of it when showing the newest).
        "live_query": {"claims_before": str(before)} if before else {},
        "live_final": _settled(ns),
        "claims": claims.rows,
        "claims_older": claims.older,
        "claims_paged": before is not None,
        "claims_shown": CLAIMS_SHOWN,
        "runs": VerificationRun.objects.filter(claim__namespace_request=ns)
        .select_related("claim")
        .order_by("-created")[:RUNS_SHOWN],
        "deletable_states": DELETABLE_STATES,
        "events": selectors.events_for(ns),
        "is_owner": request.user.pk == ns.owner_id,
        "pod_security": settings.NAMESPACE_POD_SECURITY,
        **_access_context(ns),
    }


def _settled(ns: NamespaceRequest) -> bool:
    return ns.state in SETTLED_STATES or bool(ns.state == NS.ACTIVE and ns.access_granted_at)


def _access_context(ns: NamespaceRequest) -> dict[str, Any]:
    """Who the owner is in the cluster there, and the commands that use the kubeconfig."""
    username = ns.owner.get_username()
    kubeconfig = access.kubeconfig_filename(ns)
    return {
        "cluster_role": settings.ACCESS_CLUSTER_ROLE,
        "access_user": access.cluster_username(username) if settings.ACCESS_GRANT_USER else "",
        "access_service_account": names.access_service_account_name(username),
        "token_hours": f"{settings.ACCESS_TOKEN_SECONDS / 3600:g}",
        "kubeconfig_file": kubeconfig,
        "kubectl_lines": [
            f"kubectl --kubeconfig {kubeconfig} get resourceclaims",
            f"kubectl --kubeconfig {kubeconfig} apply -f pod.yaml",
            f"kubectl --kubeconfig {kubeconfig} get pods",
        ],
    }


@login_required
@require_POST
def namespace_kubeconfig(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The owner's kubeconfig as a download; a refusal is a message on the namespace page."""
    ns = selectors.namespace_request_get(user=request.user, pk=pk)
    try:
        config = access.issue_kubeconfig(user=request.user, namespace_request=ns)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    except KubeError as error:
        messages.error(request, kube_refusal(error))
    else:
        return kubeconfig_response(config)
    return redirect("namespace", ns.pk)


def kube_refusal(error: KubeError) -> str:
    if isinstance(error, TransientKubeError):
        return _("The cluster did not answer in time; try the download again in a minute.")
    return _("The cluster refused to issue a token: %(message)s") % {"message": error.message}


def kubeconfig_response(config: access.Kubeconfig) -> HttpResponse:
    """The YAML as an attachment that no cache keeps (it holds a bearer token)."""
    response = HttpResponse(config.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, config.filename)
    response["Cache-Control"] = "no-store"
    return response
