"""The cluster side of each step: build the manifest, send it through the gateway, record.

Called by the Celery tasks. TransientKubeError propagates (the task retries it);
PermanentKubeError is recorded on the row with the cluster's own words. Every function checks
the row's state first and uses server-side apply with deterministic names, so running one
twice does no harm.
"""

from __future__ import annotations

import threading

from django.utils import timezone

from claims import observations
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.transitions import enqueue

NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State

_gateways: dict[tuple, ClusterGateway] = {}
_gateways_lock = threading.Lock()


def gateway_for(cluster: Cluster) -> ClusterGateway:
    """One gateway per cluster connection per process (it keeps its HTTP pool and discovery)."""
    key = (cluster.pk, cluster.kubeconfig_path, cluster.context, cluster.in_cluster)
    with _gateways_lock:
        if key not in _gateways:
            _gateways[key] = ClusterGateway(
                kubeconfig_path=cluster.kubeconfig_path or None,
                context=cluster.context or None,
                in_cluster=cluster.in_cluster,
            )
        return _gateways[key]


def forget_gateways() -> None:
    with _gateways_lock:
        for gateway in _gateways.values():
            gateway.close()
        _gateways.clear()


def resource_version_of(cluster: Cluster) -> str:
    """The resource.k8s.io version to speak: v1, else v1beta2, else v1beta1 (discovered)."""
    if not cluster.preferred_resource_version:
        info = gateway_for(cluster).discover()
        Cluster.objects.filter(pk=cluster.pk).update(
            server_version=info.server_version,
            resource_versions=info.resource_versions,
            preferred_resource_version=info.preferred_resource_version or "",
        )
        cluster.preferred_resource_version = info.preferred_resource_version or ""
    if not cluster.preferred_resource_version:
        raise PermanentKubeError(f"{cluster} does not serve resource.k8s.io (DRA is off).")
    return cluster.preferred_resource_version


def apply_namespace(ns: NamespaceRequest) -> bool:
    """Create the namespace; True when it exists (active) afterwards."""
    if ns.state == NS.ACTIVE:
        return True
    if ns.state != NS.APPROVED:
        return False
    manifest = manifests.namespace_manifest(name=ns.name, labels=ns.labels())
    try:
        gateway_for(ns.cluster).apply(manifest)
    except PermanentKubeError as error:
        observations.namespace_failed(namespace_request=ns, message=error.message)
        return False
    observations.namespace_applied(namespace_request=ns)
    return True


def claim_manifest(claim: ClaimRequest, api_version: str) -> dict:
    return manifests.resource_claim_manifest(
        api_version=api_version,
        namespace=claim.namespace,
        name=claim.name,
        device_class=claim.device_class,
        count=claim.count,
        all_devices=claim.all_devices,
        selector=claim.selector,
        labels=claim.labels(),
    )


def planned_claim_manifest(claim: ClaimRequest) -> dict:
    """The ResourceClaim as the portal applies it, in the version last discovered (for pages)."""
    return claim_manifest(claim, claim.cluster.preferred_resource_version or "v1")


def apply_claim(claim: ClaimRequest) -> None:
    """Namespace first (if still to do), then the ResourceClaim in the cluster's version."""
    if claim.state not in (CS.APPROVED, CS.APPLYING):
        return
    ns = claim.namespace_request
    if not apply_namespace(ns):
        message = ns.state_message or f"Namespace {ns.name} is {ns.state}."
        observations.claim_failed(claim_request=claim, message=message)
        return
    observations.claim_applying(claim_request=claim)
    if claim.state != CS.APPLYING:
        return  # released or rejected meanwhile
    try:
        manifest = claim_manifest(claim, resource_version_of(ns.cluster))
        applied = gateway_for(ns.cluster).apply(manifest)
    except PermanentKubeError as error:
        observations.claim_failed(claim_request=claim, message=error.message)
        return
    uid = applied.get("metadata", {}).get("uid", "")
    recorded = observations.claim_applied(
        claim_request=claim, api_version=manifest["apiVersion"], manifest=manifest, uid=uid
    )
    if not recorded and claim.state == CS.RELEASED:
        # Released while we applied: take back what we just created.
        gateway_for(ns.cluster).delete(manifest["apiVersion"], "ResourceClaim", ns.name, claim.name)


def start_run(run: VerificationRun) -> None:
    """Create the seed's pod1 for the run's claim."""
    if run.state not in (RS.QUEUED, RS.CREATING):
        return
    claim = run.claim
    if claim.state not in (CS.WAITING, CS.IN_USE):
        observations.run_failed(run=run, message=f"The claim is {claim.get_state_display()}.")
        return
    observations.run_creating(run=run)
    if run.state != RS.CREATING:
        return  # the claim was released meanwhile
    manifest = manifests.verification_pod_manifest(
        namespace=claim.namespace, name=run.pod_name, claim_name=claim.name, labels=run.labels()
    )
    try:
        gateway_for(claim.cluster).apply(manifest)
    except PermanentKubeError as error:
        observations.run_failed(run=run, message=error.message)
        return
    if observations.run_pod_created(run=run):
        # Look now rather than at the next beat: a short Pod holds its GPU only briefly.
        enqueue("claims.tasks.sync_cluster", claim.cluster.pk)
    elif run.state == RS.FAILED:
        # The claim was released meanwhile: this Pod must not hold its GPU.
        gateway_for(claim.cluster).delete("v1", "Pod", claim.namespace, run.pod_name)


def delete_run_pod(run: VerificationRun) -> None:
    """Delete the Pod of a run that ended early (cancelled); DRA then frees its GPU."""
    if not run.is_final or not run.pod_name:
        return
    claim = run.claim
    gateway_for(claim.cluster).delete("v1", "Pod", claim.namespace, run.pod_name)


def delete_claim(claim: ClaimRequest) -> None:
    """Remove a released claim's Pods and ResourceClaim from the cluster."""
    if claim.state != CS.RELEASED or claim.cleaned_up_at:
        return
    gateway = gateway_for(claim.cluster)
    for pod_name in claim.runs.exclude(pod_name="").values_list("pod_name", flat=True):
        gateway.delete("v1", "Pod", claim.namespace, pod_name)
    api_version = claim.applied_api_version or (
        "resource.k8s.io/" + resource_version_of(claim.cluster)
    )
    gateway.delete(api_version, "ResourceClaim", claim.namespace, claim.name)
    observations.claim_cleaned_up(claim_request=claim)


def delete_namespace(ns: NamespaceRequest) -> None:
    """Delete the namespace (the cluster removes what is in it)."""
    if ns.state != NS.DELETING:
        return
    gateway_for(ns.cluster).delete("v1", "Namespace", None, ns.name)
    now = timezone.now()
    ns.claim_requests.filter(cleaned_up_at__isnull=True, state=CS.RELEASED).update(
        cleaned_up_at=now, allocation=None, node=""
    )
    observations.namespace_deleted(namespace_request=ns)
