"""The cluster side of each step: build the manifest, send it through the gateway, record.

Called by the Celery tasks. TransientKubeError propagates (the task retries it);
PermanentKubeError is recorded on the row with the cluster's own words. Every function checks
the row's state first, creates only what is absent or adopts only what is its own
(claims.kube.ownership), and deletes only with the uid it recorded, so running one twice,
or late, does no harm.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from claims import cluster_registry, observations, quota, state_messages
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError, TransientKubeError
from claims.kube.ownership import NotOwnedError, create_or_adopt, delete_owned, owns, uid_of
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    managed_labels,
    managed_selector,
)
from claims.transitions import enqueue

NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State

_gateways: dict[tuple, ClusterGateway] = {}
_gateways_lock = threading.Lock()


def gateway_for(cluster: Cluster) -> ClusterGateway:
    """One gateway per cluster connection per process (it keeps its HTTP pool and discovery)."""
    key = (
        cluster.pk,
        cluster.kubeconfig_path,
        cluster.context,
        cluster.in_cluster,
        cluster.kubeconfig_encrypted,
    )
    with _gateways_lock:
        if key not in _gateways:
            _gateways[key] = ClusterGateway(
                **cluster_registry.gateway_options(cluster),
                qps=settings.KUBE_CLIENT_QPS,
                burst=settings.KUBE_CLIENT_BURST,
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
    """Create (or adopt our own) namespace; True when it is active afterwards."""
    if ns.state == NS.ACTIVE:
        return True
    if ns.state != NS.APPROVED:
        return False
    gateway = gateway_for(ns.cluster)
    manifest = manifests.namespace_manifest(name=ns.name, labels=ns.labels())
    try:
        uid = uid_of(create_or_adopt(gateway, manifest, uid=ns.kube_uid, kin=managed_labels()))
        # Its quota before anyone may create claims in it (the portal, or its users).
        apply_namespace_quota(ns)
    except PermanentKubeError as error:
        observations.namespace_failed(namespace_request=ns, message=error.message)
        return False
    if observations.namespace_applied(namespace_request=ns, uid=uid):
        enqueue("claims.tasks.grant_namespace_access", ns.pk)
        return True
    if ns.state != NS.ACTIVE:
        # Withdrawn or deleted while we applied (a late task): take back what we made.
        delete_owned(gateway, "v1", "Namespace", None, ns.name, uid=uid, labels=ns.labels())
    return ns.state == NS.ACTIVE


def apply_namespace_quota(ns: NamespaceRequest) -> None:
    """The namespace's ResourceQuota from its team's quotas on the cluster (none: removed)."""
    gateway = gateway_for(ns.cluster)
    hard = quota.namespace_quota_hard(quota.team_of(ns.owner), ns.cluster)
    manifest = manifests.resource_quota_manifest(namespace=ns.name, hard=hard, labels=ns.labels())
    if hard:
        create_or_adopt(gateway, manifest, kin=managed_labels())
        return
    name = manifest["metadata"]["name"]
    delete_owned(gateway, "v1", "ResourceQuota", ns.name, name, labels=ns.labels())


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
    """Namespace first (if still to do), then the ResourceClaim in a version served now."""
    if claim.state not in (CS.APPROVED, CS.APPLYING):
        return
    ns = claim.namespace_request
    if not apply_namespace(ns):
        message = ns.state_message or (
            state_messages.NAMESPACE_IS % {"namespace": ns.name, "state": ns.state}
        )
        observations.claim_failed(claim_request=claim, message=message)
        return
    observations.claim_applying(claim_request=claim)
    if claim.state != CS.APPLYING:
        return  # released or rejected meanwhile
    gateway = gateway_for(ns.cluster)
    try:
        manifest = claim_manifest(claim, gateway.claim_api_version())
        applied = create_or_adopt(gateway, manifest, uid=claim.kube_uid, kin=managed_labels())
    except NotOwnedError as error:
        observations.claim_failed(claim_request=claim, message=error.message)
        return
    except PermanentKubeError as error:
        _claim_refused(claim, error)
        return
    uid = uid_of(applied)
    recorded = observations.claim_applied(
        claim_request=claim, api_version=manifest["apiVersion"], manifest=manifest, uid=uid
    )
    if recorded:
        _start_queued_runs(claim)
    elif claim.state == CS.RELEASED:
        # Released while we applied: take back what we just created.
        api_version, labels = manifest["apiVersion"], claim.labels()
        delete_owned(
            gateway, api_version, "ResourceClaim", ns.name, claim.name, uid=uid, labels=labels
        )


def _stale(row: VerificationRun) -> bool:
    return row.updated < timezone.now() - timedelta(seconds=settings.RECONCILE_STALE_SECONDS)


def _start_queued_runs(claim: ClaimRequest) -> None:
    """Runs asked for before the claim was applied start now, in this task: no second hop."""
    for run in claim.runs.filter(state=RS.QUEUED).order_by("pk"):
        run.claim = claim
        try:
            start_run(run)
        except TransientKubeError:  # the task carries on, with its retries
            enqueue("claims.tasks.start_verification_run", run.pk, True)


def _claim_refused(claim: ClaimRequest, error: PermanentKubeError) -> None:
    """A 404 for the namespace means it was deleted outside the portal: heal it first."""
    ns = claim.namespace_request
    if error.status == 404 and error.details.get("kind") == "namespaces":
        observations.namespace_drifted(
            namespace_request=ns,
            message=state_messages.NAMESPACE_DELETED_OUTSIDE % {"namespace": ns.name},
        )
        return
    observations.claim_failed(claim_request=claim, message=error.message)


def verification_pod(run: VerificationRun) -> dict:
    claim = run.claim
    return manifests.verification_pod_manifest(
        namespace=claim.namespace,
        name=run.pod_name,
        claim_name=claim.name,
        labels=run.labels(),
        images=(settings.VECTOR_ADD_IMAGE, settings.DEVICE_QUERY_IMAGE),
        image_pull_secret=claim.cluster.image_pull_secret,
        active_deadline_seconds=settings.RUN_ACTIVE_DEADLINE_SECONDS or None,
    )


def start_run(run: VerificationRun, *, resume: bool = False) -> None:
    """Create the seed's pod1 for the run's claim. A run already creating is another
    worker's until it is stale, unless this is that worker's retry (resume)."""
    if run.state not in (RS.QUEUED, RS.CREATING):
        return
    if run.state == RS.CREATING and not (resume or _stale(run)):
        return
    claim = run.claim
    if claim.state in (CS.PENDING, CS.APPROVED, CS.APPLYING):
        return  # queued until the claim is applied: apply_claim starts it then
    if claim.state not in (CS.WAITING, CS.IN_USE):
        state = claim.get_state_display()
        observations.run_failed(run=run, message=state_messages.CLAIM_IS % {"state": state})
        return
    if run.state == RS.QUEUED and not observations.run_creating(run=run):
        return  # another worker took it, or the claim was released meanwhile
    gateway = gateway_for(claim.cluster)
    try:
        uid = uid_of(create_or_adopt(gateway, verification_pod(run), uid=run.pod_uid))
    except PermanentKubeError as error:
        observations.run_failed(run=run, message=error.message)
        return
    if observations.run_pod_created(run=run, uid=uid):
        if not claim.cluster.is_followed:
            # Look now rather than at the next beat: a short Pod holds its GPU only briefly.
            # (A follower sees the Pod on its watch; a sync here would hold its lease.)
            enqueue("claims.tasks.sync_cluster", claim.cluster.pk)
    elif run.state == RS.FAILED:
        # Cancelled or released meanwhile: this Pod must not hold its GPU.
        _delete_pod(gateway, run, uid)


def _delete_pod(gateway: ClusterGateway, run: VerificationRun, uid: str = "") -> None:
    namespace = run.claim.namespace
    uid = uid or run.pod_uid
    delete_owned(gateway, "v1", "Pod", namespace, run.pod_name, uid=uid, labels=run.labels())


def delete_run_pod(run: VerificationRun) -> None:
    """Delete the Pod of a run that ended early (cancelled); DRA then frees its GPU."""
    if not run.is_final or not run.pod_name:
        return
    _delete_pod(gateway_for(run.claim.cluster), run)


def delete_claim(claim: ClaimRequest) -> None:
    """Remove a released claim's Pods and ResourceClaim from the cluster (only ours)."""
    if claim.state != CS.RELEASED or claim.cleaned_up_at:
        return
    gateway = gateway_for(claim.cluster)
    # One list of the claim's Pods, not a delete per run it ever had (most Pods are long gone).
    selector = f"{managed_selector()},gpu-portal.io/claim-request={claim.pk}"
    present = {pod.name for pod in gateway.list_pods(selector)}
    for run in claim.runs.filter(pod_name__in=present):
        run.claim = claim
        _delete_pod(gateway, run)
    # Whatever version it was applied in: the gateway uses one the cluster serves now.
    api_version = claim.applied_api_version or gateway.claim_api_version()
    target = (api_version, "ResourceClaim", claim.namespace, claim.name)
    delete_owned(gateway, *target, uid=claim.kube_uid, labels=claim.labels())
    remaining = gateway.read(*target)
    if remaining is not None and _is_ours(remaining, claim):
        # Held by its finalizer while a Pod that used it terminates: not cleaned up yet.
        raise TransientKubeError(f"ResourceClaim {claim.name} is still being deleted.")
    observations.claim_cleaned_up(claim_request=claim)


def delete_namespace(ns: NamespaceRequest) -> None:
    """Delete our namespace and stay `deleting` until the cluster has really removed it."""
    if ns.state != NS.DELETING:
        return
    gateway = gateway_for(ns.cluster)
    labels = ns.labels()
    delete_owned(gateway, "v1", "Namespace", None, ns.name, uid=ns.kube_uid, labels=labels)
    remaining = gateway.read("v1", "Namespace", None, ns.name)
    if remaining is not None and uid_of(remaining) in (ns.kube_uid, _owned_uid(remaining, ns)):
        raise TransientKubeError(f"Namespace {ns.name} is still terminating.")
    now = timezone.now()
    ns.claim_requests.filter(cleaned_up_at__isnull=True, state=CS.RELEASED).update(
        cleaned_up_at=now, allocation=None, node=""
    )
    observations.namespace_deleted(namespace_request=ns)


def _owned_uid(obj: dict, ns: NamespaceRequest) -> str | None:
    return uid_of(obj) if owns(obj, ns.labels()) else None


def _is_ours(obj: dict, claim: ClaimRequest) -> bool:
    """The very object we made (by the uid recorded), else one with our labels."""
    return uid_of(obj) == claim.kube_uid if claim.kube_uid else owns(obj, claim.labels())
