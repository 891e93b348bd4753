"""State changes the cluster reports about namespaces and claims, from the tasks and the sync.

Like claims.domain.services, each change goes through claims.domain.transitions
(conditional UPDATE plus an AuditEvent); the actor is the system (None). Every function is
safe to call twice. waiting_for_cluster serves any row; the runs' Pods, logs and verdict are
in claims.domain.run_observations.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from claims.domain import state_messages
from claims.domain.transitions import (
    LIVE_CLAIMS,
    change,
    enqueue,
    fail_queued_runs,
    record_event,
    update_fields,
)
from claims.models import ClaimRequest, NamespaceRequest

NS = NamespaceRequest.State
CS = ClaimRequest.State


def waiting_for_cluster(row: Any, *, message: str) -> None:
    """The cluster did not answer within a task's retries: not a failure. The row keeps its
    state, says why it waits, and the reconciler tries again after a capped back-off."""
    rounds = row.cluster_waits + 1
    delay = min(
        settings.CLUSTER_WAIT_FIRST_SECONDS * 2 ** (rounds - 1),
        settings.CLUSTER_WAIT_MAX_SECONDS,
    )
    text = state_messages.WAITING_FOR_CLUSTER % {"seconds": delay, "reason": message}
    at = timezone.now() + timedelta(seconds=delay)
    changed = (
        type(row)
        .objects.filter(pk=row.pk, state=row.state)
        .update(state_message=text, next_attempt_at=at, cluster_waits=rounds)
    )
    if changed:
        row.state_message, row.next_attempt_at, row.cluster_waits = text, at, rounds
        record_event(row, text)


def namespace_applied(*, namespace_request: NamespaceRequest, uid: str = "") -> bool:
    return change(
        namespace_request,
        "created",
        message=gettext_noop("Namespace created."),
        kube_uid=uid,
    )


def namespace_failed(*, namespace_request: NamespaceRequest, message: str) -> bool:
    """The namespace cannot be (or no longer is) the portal's: it and its claims fail."""
    ns = namespace_request
    with transaction.atomic():
        changed = change(ns, "fail", message=message)
        if changed:
            live = ns.claim_requests.filter(state__in=LIVE_CLAIMS)
            for claim in live:
                claim_failed(
                    claim_request=claim,
                    message=state_messages.NAMESPACE_FAILED
                    % {"namespace": ns.name, "reason": message},
                )
    return changed


def namespace_drifted(*, namespace_request: NamespaceRequest, message: str) -> bool:
    """Our namespace was deleted outside the portal: create it again, with its access and
    the claims that lived in it (their GPUs went with it)."""
    ns = namespace_request
    with transaction.atomic():
        changed = change(
            ns,
            "recreate",
            message=state_messages.CREATING_AGAIN % {"reason": message},
            access_granted_at=None,
        )
        if changed:
            enqueue("claims.worker.tasks.apply_namespace", ns.pk)
            for claim in ns.claim_requests.filter(state__in=LIVE_CLAIMS):
                claim_drifted(
                    claim_request=claim,
                    message=state_messages.NAMESPACE_RECREATED % {"namespace": ns.name},
                )
    return changed


def namespace_access_granted(*, namespace_request: NamespaceRequest) -> None:
    update_fields(namespace_request, access_granted_at=timezone.now())


def namespace_access_lost(*, namespace_request: NamespaceRequest, message: str) -> None:
    """Access objects of ours were removed outside the portal: grant access again."""
    update_fields(namespace_request, access_granted_at=None)
    record_event(namespace_request, state_messages.GRANTING_AGAIN % {"reason": message})
    enqueue("claims.worker.tasks.grant_namespace_access", namespace_request.pk)


def labels_restored(*, obj: NamespaceRequest | ClaimRequest, message: str) -> None:
    """The labels of an object of ours were changed outside the portal and put back."""
    record_event(obj, message)


def namespace_uid_seen(*, namespace_request: NamespaceRequest, uid: str) -> None:
    update_fields(namespace_request, kube_uid=uid)


def namespace_deleted(*, namespace_request: NamespaceRequest, message: str = "") -> bool:
    return change(
        namespace_request,
        "deleted",
        message=message or gettext_noop("Namespace deleted."),
    )


def claim_applying(*, claim_request: ClaimRequest) -> bool:
    """Approved → applying: this worker owns the apply now."""
    return change(
        claim_request,
        "apply",
        message=gettext_noop("Applying to the cluster."),
    )


def claim_applied(
    *, claim_request: ClaimRequest, api_version: str, manifest: dict[str, Any], uid: str = ""
) -> bool:
    message = state_messages.CLAIM_CREATED % {"version": api_version}
    return change(
        claim_request,
        "applied",
        message=message,
        applied_api_version=api_version,
        applied_manifest=manifest,
        applied_at=timezone.now(),
        kube_uid=uid,
    )


def claim_drifted(*, claim_request: ClaimRequest, message: str) -> bool:
    """The ResourceClaim we made is gone from the cluster: apply it again."""
    changed = change(
        claim_request,
        "reapply",
        message=state_messages.REAPPLYING % {"reason": message},
        allocation=None,
        node="",
    )
    if changed:
        enqueue("claims.worker.tasks.apply_claim", claim_request.pk)
    return changed


def claim_failed(*, claim_request: ClaimRequest, message: str) -> bool:
    with transaction.atomic():
        failed = change(claim_request, "fail", message=message)
        if failed:
            fail_queued_runs(
                claim_request, message=state_messages.CLAIM_FAILED % {"reason": message}
            )
    return failed


def claim_allocation_seen(
    *, claim_request: ClaimRequest, allocation: dict[str, Any] | None
) -> bool:
    """Record the claim's current allocation: in use while allocated, waiting when not."""
    claim = claim_request
    node = (allocation or {}).get("node") or ""
    if allocation and claim.state == CS.WAITING:
        devices = ", ".join(d["device"] for d in allocation.get("devices", []))
        return change(
            claim,
            "allocated",
            allocation=allocation,
            allocated_at=timezone.now(),
            node=node,
            message=state_messages.ALLOCATED % {"devices": devices, "node": node},
        )
    if not allocation and claim.state == CS.IN_USE:
        message = state_messages.NO_POD_USES_IT
        return change(claim, "freed", allocation=None, allocated_at=None, node="", message=message)
    if claim.state in (CS.WAITING, CS.IN_USE) and claim.allocation != allocation:
        if _device_ids(claim.allocation) != _device_ids(allocation):
            update_fields(claim, allocation=allocation, node=node, allocated_at=_since(allocation))
        else:
            update_fields(claim, allocation=allocation, node=node)
    return False


def _device_ids(allocation: dict[str, Any] | None) -> set[tuple[str, str, str]]:
    return {
        (d.get("driver", ""), d.get("pool", ""), d.get("device", ""))
        for d in (allocation or {}).get("devices") or []
    }


def _since(allocation: dict[str, Any] | None) -> Any:
    return timezone.now() if allocation else None


def claim_release_waiting(*, claim_request: ClaimRequest, pod: str, node: str) -> None:
    """A released claim's Pod is deleted but still there (Terminating): until its node's
    kubelet confirms, the Pod holds the GPU and the release is not done; the row says so."""
    message = state_messages.RELEASE_WAITING_FOR_KUBELET % {"pod": pod, "node": node}
    if claim_request.state_message != message:
        update_fields(claim_request, state_message=message)
        record_event(claim_request, message)


def claim_cleaned_up(*, claim_request: ClaimRequest) -> None:
    """A released claim holds nothing in the cluster any more (deleted, or never applied): the
    one way a row is marked cleaned up."""
    update_fields(claim_request, cleaned_up_at=timezone.now(), allocation=None, node="")
