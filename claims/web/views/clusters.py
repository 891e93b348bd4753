"""The clusters the portal knows: version, served DRA APIs, device classes, the GPU map."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max, OuterRef
from django.http import Http404, HttpResponse
from django.shortcuts import render

from claims.kube import preflight
from claims.kube.parsing import ClusterInfo, DeviceClassInfo, DeviceInfo, PreflightCheck
from claims.live import changes
from claims.models import ClaimRequest, Cluster, TeamMembership, VerificationRun
from claims.models.teams import first_team_id
from claims.read import device_matching, gpu_map, queue, selectors, utilisation, why_pending
from claims.web.views import live
from claims.web.views.common import HtmxHttpRequest, login_required

CLUSTER_PAGE = live.LivePage(
    "claims/cluster_detail.html", "cluster", parts=("gpu_map", "gpu_map_text")
)
CS, RS = ClaimRequest.State, VerificationRun.State
# A claim waits for devices in these states; a run's Pod for a node in these.
WAITING_CLAIMS = (CS.WAITING,)
WAITING_RUNS = (RS.CREATING, RS.PENDING)


@login_required
def cluster_list(request: HtmxHttpRequest) -> HttpResponse:
    context = {"nav": "clusters", "clusters": selectors.cluster_list()}
    return render(request, "claims/cluster_list.html", context)


@login_required
def cluster_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _cluster_page(request, pk, claim=None)


@login_required
def cluster_claim_map(request: HtmxHttpRequest, pk: int, claim_pk: int) -> HttpResponse:
    """The cluster page with the devices a claim may get marked on the map."""
    claim = selectors.claim_request_get(user=request.user, pk=claim_pk)
    if claim.namespace_request.cluster_id != pk:
        raise Http404
    return _cluster_page(request, pk, claim=claim)


def _cluster_page(request: HtmxHttpRequest, pk: int, claim: ClaimRequest | None) -> HttpResponse:
    if not selectors.cluster_list().filter(pk=pk).exists():
        raise Http404
    return live.respond(
        request,
        CLUSTER_PAGE,
        live.Live(
            version=lambda: map_version(pk),
            channels=[changes.EVERYTHING],
            context=lambda: _cluster_context(request, pk, claim),
        ),
    )


def map_version(cluster_pk: int) -> str:
    """Changes when a claim on the cluster changes (allocations) or its inventory does: the
    claims by Redis's count of announced changes when it can say, else by the newest
    `updated` of the cluster's claims (which reads every one of them)."""
    synced = Cluster.objects.filter(pk=cluster_pk).values_list("inventory_synced_at", flat=True)
    counted = None if connection.in_atomic_block else changes.scope_version(changes.EVERYTHING)
    if counted is None:
        claims = ClaimRequest.objects.filter(namespace_request__cluster_id=cluster_pk)
        newest = claims.aggregate(newest=Max("updated"))["newest"]
        counted = newest.isoformat() if newest else ""
    return f"{counted}|{synced.first() or ''}"


def _cluster_context(
    request: HtmxHttpRequest, pk: int, claim: ClaimRequest | None
) -> dict[str, Any]:
    cluster = Cluster.objects.get(pk=pk)
    matching = None
    if claim is not None:
        inv = cluster.inventory
        matching = device_matching.matching_ids(inv, claim.device_class, claim.selector)
    context: dict[str, Any] = {
        "nav": "clusters",
        "cluster": cluster,
        "map_claim": claim,
        "gpu_map": gpu_map.build(
            cluster.inventory,
            holds(cluster, request.user),
            matching=matching,
            usage=_devices_usage(cluster),
        ),
    }
    if "since" not in request.GET:  # the rest of the page is outside the live part
        context["device_classes"] = [
            {**dc, "count": dc["device_count"]} for dc in selectors.device_classes(cluster=cluster)
        ]
        context["preflight"] = cluster.inventory.get("preflight") or preflight_from_sync(cluster)
        context["utilisation_check"] = utilisation.utilisation_check(cluster)
    return context


def holds(cluster: Cluster, user: Any) -> list[gpu_map.Hold]:
    """The allocations of the claims the portal follows on the cluster; whose they are only
    for approvers and for the owner, to others only mine, my team's or someone else's. Then
    what claims made outside the portal hold: their namespace and name for admins only."""
    approver = selectors.user_is_approver(user)
    teams = set(TeamMembership.objects.filter(user=user).values_list("team_id", flat=True))
    rows = (
        ClaimRequest.objects.filter(namespace_request__cluster=cluster, allocation__isnull=False)
        .annotate(owner_team=first_team_id(OuterRef("owner_id")))
        .values_list(
            "pk",
            "name",
            "namespace_request__name",
            "owner_id",
            "owner__username",
            "allocation",
            "owner_team",
        )
    )
    found = []
    for pk, name, namespace, owner_id, owner, allocation, team in rows:
        shown = approver or owner_id == user.pk
        whose = gpu_map.whose(
            owner_id=owner_id, owner_team_id=team, viewer=user, viewer_teams=teams
        )
        found.append(
            gpu_map.Hold(
                claim_id=pk,  # kept to count holders; the page shows it only when shown
                claim_name=name if shown else "",
                namespace=namespace if shown else "",
                owner=owner if shown else "",
                devices=gpu_map.allocated_ids(allocation),
                shown=shown,
                whose=whose,
            )
        )
    admin = bool(user.is_staff or user.is_superuser)
    return found + gpu_map.outside_holds(cluster.inventory, shown=admin)


def _devices_usage(cluster: Cluster) -> dict[tuple[str, str], Any] | None:
    """Each GPU's use now for the map's colours; None (no colours) without metrics."""
    if not (cluster.prometheus_url or settings.PROMETHEUS_URL or settings.DCGM_EXPORTER_URLS):
        return None
    found = utilisation.devices_usage(cluster)
    return None if isinstance(found, str) else dict(found)


def claim_map_context(claim: ClaimRequest, user: Any) -> dict[str, Any]:
    """For the claim page: its node on the map with its devices marked, and why it waits."""
    cluster = claim.namespace_request.cluster
    found = holds(cluster, user)
    context: dict[str, Any] = {"claim_map": None, "pending_reasons": []}
    if claim.allocation:
        mine = gpu_map.allocated_ids(claim.allocation)
        nodes = [claim.allocation.get("node") or claim.node]
        context["claim_map"] = gpu_map.build(cluster.inventory, found, highlight=mine, nodes=nodes)
    elif claim.state in WAITING_CLAIMS:
        waiting = claim.runs.filter(state__in=WAITING_RUNS).order_by("-created").first()
        said = (waiting.state_message, waiting.pod_warnings) if waiting else ("", [])
        reasons = reasons_for(claim, found, *said)
        # Without a Pod nothing waits yet, unless work waits its turn in the queue: else only
        # what no Pod could ever get past is worth saying.
        lasting = [reason for reason in reasons if reason.kind in why_pending.LASTING]
        context["pending_reasons"] = reasons if waiting or queue.holds_work(claim) else lasting
    elif claim.state == CS.FAILED:
        context["pending_reasons"] = why_pending.from_refusal(claim.state_message)
    return context


def run_pending_context(run: VerificationRun, user: Any) -> dict[str, Any]:
    """For the run page: why its Pod waits, while it does (or waits to be created, its
    claim's turn in the queue not come)."""
    claim = run.claim
    if run.state in WAITING_RUNS:
        said = (run.state_message, run.pod_warnings)
    elif run.state == RS.QUEUED and queue.holds_work(claim):
        said = ("", [])
    else:
        return {"pending_reasons": []}
    found = holds(claim.namespace_request.cluster, user)
    return {"pending_reasons": reasons_for(claim, found, *said)}


def reasons_for(
    claim: ClaimRequest, found: list[gpu_map.Hold], message: str, warnings: list | None = None
) -> list[why_pending.Reason]:
    asked = why_pending.Asked(
        device_class=claim.device_class,
        count=None if claim.all_devices else claim.count or 1,
        selector=claim.selector,
    )
    return why_pending.explain(
        asked=asked,
        inventory=claim.namespace_request.cluster.inventory,
        holds=found,
        own_claim=claim.pk,
        pod_message=message,
        pod_warnings=warnings or [],
    )


def preflight_from_sync(cluster: Cluster) -> list[PreflightCheck]:
    """The seed's prerequisites, judged by the gateway's rules from what the last sync saw."""
    if not cluster.server_version:
        return []
    info = ClusterInfo(
        cluster.server_version,
        cluster.resource_versions,
        cluster.preferred_resource_version or None,
    )
    checks = [preflight.check_server_version(info), preflight.check_dra_served(info)]
    if not info.preferred_resource_version:
        return checks + preflight.skipped_without_dra()
    classes = [DeviceClassInfo(**dc) for dc in cluster.inventory.get("device_classes", [])]
    devices = [DeviceInfo(**device) for device in cluster.inventory.get("devices", [])]
    nodes = sorted({device.node for device in devices if device.node})
    return [
        *checks,
        preflight.check_device_classes(classes),
        preflight.check_gpu_devices(devices),
        preflight.check_gpu_nodes(devices, nodes),
    ]
