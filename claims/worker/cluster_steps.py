"""The cluster side of each step: build the manifest, send it through the gateway, record.

Called by the Celery tasks. TransientKubeError propagates (the task retries it);
PermanentKubeError is recorded on the row with the cluster's own words. Every function checks
the row's state first, creates only what is absent or adopts only what is its own
(claims.kube.ownership), and deletes only with the uid it recorded, so running one twice,
or late, does no harm.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from claims.clusters.gateways import gateway_for
from claims.domain import observations, run_observations, state_messages
from claims.domain.transitions import enqueue
from claims.kube import labels as label_keys
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError, PodState, TransientKubeError
from claims.kube.ownership import NotOwnedError, create_or_adopt, delete_owned, owns, uid_of
from claims.models import (
    ClaimRequest,
    NamespaceRequest,
    VerificationRun,
    managed_labels,
    managed_selector,
)
from claims.policy import quota
from claims.read import planned
from claims.read.planned import claim_manifest
from claims.worker import queue_turn, workload_steps

NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State


def apply_namespace(ns: NamespaceRequest) -> bool:
    """Create (or adopt our own) namespace; True when it is active afterwards."""
    if ns.state == NS.ACTIVE:
        return True
    if ns.state != NS.APPROVED:
        return False
    # One apply at a time: the namespace's task and the task of a claim asked for right after
    # may both come; the second waits for the first and finds the namespace active (one write).
    with transaction.atomic():
        ns.refresh_from_db(from_queryset=NamespaceRequest.objects.select_for_update())
        return _apply_namespace(ns) if ns.state == NS.APPROVED else ns.state == NS.ACTIVE


def _apply_namespace(ns: NamespaceRequest) -> bool:
    gateway = gateway_for(ns.cluster)
    manifest = planned.namespace_manifest(ns.name, ns.labels())
    try:
        uid = uid_of(create_or_adopt(gateway, manifest, uid=ns.kube_uid, kin=managed_labels()))
        # Its quota before anyone may create claims in it (the portal, or its users).
        apply_namespace_quota(ns)
    except PermanentKubeError as error:
        observations.namespace_failed(namespace_request=ns, message=error.message)
        return False
    if observations.namespace_applied(namespace_request=ns, uid=uid):
        enqueue("claims.worker.tasks.grant_namespace_access", ns.pk)
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


def apply_claim(claim: ClaimRequest) -> None:
    """Namespace first (if still to do), then the ResourceClaim in a version served now."""
    ns = claim.namespace_request
    if claim.state not in (CS.APPROVED, CS.APPLYING):
        if ns.state == NS.APPROVED:
            apply_namespace(ns)  # approved with this claim, which was withdrawn meanwhile
        return
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
            enqueue("claims.worker.tasks.start_verification_run", run.pk, True)


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
        run_observations.run_failed(run=run, message=state_messages.CLAIM_IS % {"state": state})
        return
    if run.state == RS.QUEUED and queue_turn.run_must_wait(run):
        return  # its claim waits its turn: claims/worker/queue_steps.py starts it then
    if run.state == RS.QUEUED and not run_observations.run_creating(run=run):
        return  # another worker took it, or the claim was released meanwhile
    gateway = gateway_for(claim.cluster)
    try:
        uid = uid_of(create_or_adopt(gateway, verification_pod(run), uid=run.pod_uid))
    except PermanentKubeError as error:
        run_observations.run_failed(run=run, message=error.message)
        return
    # The cluster's loop sees the Pod on its watch from here on.
    if not run_observations.run_pod_created(run=run, uid=uid) and run.state == RS.FAILED:
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
    # Its workloads first: their Pods use the claim, which is not freed while they run.
    workload_steps.delete_claim_workloads(claim, gateway)
    # One list of the claim's Pods, not a delete per run it ever had (most Pods are long gone).
    selector = f"{managed_selector()},{label_keys.CLAIM_REQUEST}={claim.pk}"
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
        # Held by its finalizer while a Pod that used it terminates: not cleaned up yet. A
        # bound Pod goes only once its node's kubelet confirms (on a dead node: not at all).
        if present and (terminating := _terminating(gateway, selector)):
            node = terminating.node or ""
            observations.claim_release_waiting(claim_request=claim, pod=terminating.name, node=node)
        raise TransientKubeError(f"ResourceClaim {claim.name} is still being deleted.")
    observations.claim_cleaned_up(claim_request=claim)


def _terminating(gateway: ClusterGateway, selector: str) -> PodState | None:
    return next((pod for pod in gateway.list_pods(selector) if pod.deletion_timestamp), None)


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
    for claim in ns.claim_requests.filter(cleaned_up_at__isnull=True, state=CS.RELEASED):
        observations.claim_cleaned_up(claim_request=claim)
    # Someone else's namespace of that name (the reason this request failed) stays, and the
    # message must not say it went.
    left = state_messages.NAMESPACE_NOT_OURS_LEFT % {"namespace": ns.name} if remaining else ""
    observations.namespace_deleted(namespace_request=ns, message=left)


def _owned_uid(obj: dict, ns: NamespaceRequest) -> str | None:
    return uid_of(obj) if owns(obj, ns.labels()) else None


def _is_ours(obj: dict, claim: ClaimRequest) -> bool:
    """The very object we made (by the uid recorded), else one with our labels."""
    return uid_of(obj) == claim.kube_uid if claim.kube_uid else owns(obj, claim.labels())
