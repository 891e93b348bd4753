"""The cluster side of a workload: apply its manifests, delete them, follow its Pods.

Called by the Celery tasks (start_workload, delete_workload) and by the claim's cleanup (its
workloads go before its ResourceClaim); the sync follows them (claims/worker/workload_pods.py).
As claims.worker.cluster_steps: the row's state is checked first, only our own objects are
adopted or deleted, so running a step twice, or late, does no harm. A workload the cluster
refuses leaves nothing behind: what was created before the refusal is deleted.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from claims.clusters import credentials
from claims.clusters.gateways import gateway_for
from claims.domain import state_messages
from claims.domain import workload_observations as observed
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from claims.kube.ownership import create_or_adopt, delete_owned, uid_of
from claims.models import ClaimRequest, Workload, WorkloadKind
from claims.read import planned
from claims.worker import queue_turn

CS = ClaimRequest.State
WS = Workload.State
USABLE_CLAIMS = (CS.WAITING, CS.IN_USE)
# What a workload is made of, in the order they are deleted (the way in last).
NOTEBOOK_PARTS = (
    ("networking.k8s.io/v1", "Ingress"),
    ("v1", "Service"),
    ("v1", "Pod"),
)
JOB_PARTS = (("batch/v1", "Job"),)


def _stale(workload: Workload) -> bool:
    return workload.updated < timezone.now() - timedelta(seconds=settings.RECONCILE_STALE_SECONDS)


def _token(workload: Workload) -> str:
    encrypted = workload.access_token_encrypted
    return credentials.decrypt(encrypted) if encrypted else ""


def start_workload(workload: Workload, *, resume: bool = False) -> None:
    """Create the workload's Job, or its notebook's Pod, Service and Ingress."""
    if workload.state not in (WS.PENDING, WS.APPLYING):
        return
    if workload.state == WS.APPLYING and not (resume or _stale(workload)):
        return  # another worker's until it is stale
    claim = workload.claim
    if claim.state not in USABLE_CLAIMS:
        state = claim.get_state_display()
        observed.workload_failed(
            workload=workload, message=state_messages.CLAIM_IS % {"state": state}
        )
        return
    if workload.state == WS.PENDING and not observed.workload_applying(workload=workload):
        return  # stopped meanwhile, or another worker took it
    gateway = gateway_for(claim.cluster)
    # The queue (claims/worker/queue_turn.py): a Job whose claim does not fit now is created
    # suspended; a notebook is not created yet (queue_steps creates it in its turn). Where
    # Kueue runs, every Job waits for Kueue in the team's LocalQueue.
    suspend = queue_turn.workload_must_wait(workload)
    if suspend and workload.kind != WorkloadKind.JOB:
        return
    kueue_queue = ""
    if claim.cluster.kueue:
        kueue_queue = planned.kueue_queue_of(workload)
        observed.workload_queued_in_kueue(workload=workload, queue=kueue_queue)
    documents = planned.workload_manifests(
        workload, token=_token(workload), suspend=suspend, kueue_queue=kueue_queue
    )
    created: list[dict[str, Any]] = []
    try:
        for manifest in documents:
            created.append(create_or_adopt(gateway, manifest))
    except PermanentKubeError as error:
        # Nothing half-made: what went in before the refusal comes out again.
        _delete_parts(gateway, workload)
        observed.workload_failed(
            workload=workload, message=state_messages.WORKLOAD_FAILED % {"reason": error.message}
        )
        return
    # The Job, or the notebook's Pod: what the workload's state follows.
    uid = uid_of(created[0])
    if not observed.workload_applied(workload=workload, uid=uid) and workload.is_final:
        # Stopped while we applied (or its claim released): take back what we made.
        _delete_parts(gateway, workload)
        observed.workload_cleaned_up(workload=workload)


def _parts(workload: Workload) -> tuple[tuple[str, str], ...]:
    return JOB_PARTS if workload.kind == WorkloadKind.JOB else NOTEBOOK_PARTS


def _delete_parts(gateway: ClusterGateway, workload: Workload) -> None:
    namespace, labels = workload.claim.namespace, workload.labels()
    for api_version, kind in _parts(workload):
        uid = workload.kube_uid if kind in ("Job", "Pod") else ""
        delete_owned(
            gateway,
            api_version,
            kind,
            namespace,
            workload.name,
            uid=uid,
            labels=labels,
            # A Job's Pods go with it (the API's default for a Job leaves them running).
            propagation_policy="Background" if kind == "Job" else "",
        )


def delete_workload(workload: Workload) -> None:
    """Delete the objects of a workload that ended early (stopped, its claim released)."""
    if not workload.is_final or workload.cleaned_up_at or not workload.name:
        return
    _delete_parts(gateway_for(workload.claim.cluster), workload)
    observed.workload_cleaned_up(workload=workload)


def delete_claim_workloads(claim: ClaimRequest, gateway: ClusterGateway) -> None:
    """Before a released claim's ResourceClaim: every workload's objects (nothing the portal
    started outlives its claim)."""
    for workload in claim.workloads.filter(cleaned_up_at__isnull=True).exclude(name=""):
        workload.claim = claim
        _delete_parts(gateway, workload)
        observed.workload_cleaned_up(workload=workload)
