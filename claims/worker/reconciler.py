"""Desired versus observed: finish work whose message was lost (beat's reconcile, from the
database alone), and heal or report what changed in a cluster behind the portal's back
(check_cluster and sweep_cluster, which the cluster loop runs from its informers' caches on
each change and on a resync timer: no list of everything on a timer).

The drift policy (docs/operations.md): an object of ours deleted outside the portal is
created again; one whose labels were changed is relabelled (its uid proves it is ours); one
replaced by an object we did not make fails its request with the reason, and nothing is
touched. Rows with a retry already scheduled (next_attempt_at) are left to that retry.

Orphans (sweep_cluster, on a slower timer): an object with this installation's labels whose
request (namespace request, claim or run named in its labels) is gone from the database is
deleted, with its uid as precondition. Unlabelled objects and those of another installation
(PORTAL_INSTANCE) are never listed, so never touched.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from claims.clusters.gateways import gateway_for
from claims.domain import audit, observations, state_messages
from claims.domain.transitions import enqueue
from claims.kube import labels as label_keys
from claims.kube.gateway import ClusterGateway, KubeError
from claims.kube.ownership import is_terminating, owns, uid_of
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    Workload,
)
from claims.read import planned
from claims.worker.cluster_view import ClusterView, LiveView
from claims.worker.run_pods import GONE_GRACE

log = logging.getLogger(__name__)
Obj = dict[str, Any]

NS = NamespaceRequest.State
CS = ClaimRequest.State
RS = VerificationRun.State
WS = Workload.State
TERMINAL_PHASES = ("Succeeded", "Failed")


def _pending_work() -> list[tuple[str, QuerySet[Any]]]:
    return [
        ("claims.worker.tasks.apply_namespace", NamespaceRequest.objects.filter(state=NS.APPROVED)),
        (
            "claims.worker.tasks.delete_namespace",
            NamespaceRequest.objects.filter(state=NS.DELETING),
        ),
        (
            "claims.worker.tasks.grant_namespace_access",
            NamespaceRequest.objects.filter(state=NS.ACTIVE, access_granted_at__isnull=True),
        ),
        (
            "claims.worker.tasks.apply_claim",
            ClaimRequest.objects.filter(state__in=(CS.APPROVED, CS.APPLYING)),
        ),
        (
            "claims.worker.tasks.delete_claim",
            ClaimRequest.objects.filter(state=CS.RELEASED, cleaned_up_at__isnull=True),
        ),
        (
            "claims.worker.tasks.start_verification_run",
            VerificationRun.objects.filter(state__in=(RS.QUEUED, RS.CREATING)),
        ),
        (
            "claims.worker.tasks.start_workload",
            Workload.objects.filter(state__in=(WS.PENDING, WS.APPLYING)),
        ),
        (
            # Stopped (by its owner, or with its claim) and its objects not yet deleted.
            "claims.worker.tasks.delete_workload",
            Workload.objects.filter(state=WS.STOPPED, cleaned_up_at__isnull=True),
        ),
    ]


def reconcile(*, stale_seconds: float | None = None) -> int:
    """Re-enqueue work that sat still too long; count the messages sent. The database alone:
    what the clusters hold, their loops compare (check_cluster)."""
    if stale_seconds is None:
        stale_seconds = settings.RECONCILE_STALE_SECONDS
    return _resend_stale_work(timezone.now(), timedelta(seconds=stale_seconds))


def _resend_stale_work(now: datetime, stale: timedelta) -> int:
    sent = 0
    not_scheduled = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    for task_name, queryset in _pending_work():
        due = list(
            queryset.filter(not_scheduled, updated__lt=now - stale).values_list("pk", flat=True)
        )
        # A message is on its way now: the next round leaves these rows to it.
        queryset.model.objects.filter(pk__in=due).update(next_attempt_at=now + stale)
        for pk in due:
            enqueue(task_name, pk)
        sent += len(due)
    return sent


def check_cluster(
    cluster: Cluster,
    gateway: ClusterGateway,
    view: ClusterView,
    *,
    stale_seconds: float | None = None,
) -> int:
    """Compare the cluster's active namespaces, their access and the Pods of ended runs with
    what view holds; heal or report each drift. Count the delete messages sent."""
    if stale_seconds is None:
        stale_seconds = settings.RECONCILE_STALE_SECONDS
    before = timezone.now() - timedelta(seconds=stale_seconds)
    active = _active_namespaces(cluster)
    namespaces = view.owned("Namespace") if active else None
    if namespaces is not None:
        _compare_namespaces(active, namespaces, gateway)
    _reconcile_access([ns for ns in active if ns.access_granted_at], view)
    ended = _ended_runs_with_live_pods(cluster, view, before)
    for pk in ended:
        enqueue("claims.worker.tasks.delete_run_pod", pk)
    return len(ended)


def look_at_cluster(cluster: Cluster, *, stale_seconds: float | None = None) -> int:
    """check_cluster from live lists, a one-off look (the shell, tests)."""
    gateway = gateway_for(cluster)
    try:
        return check_cluster(cluster, gateway, LiveView(gateway), stale_seconds=stale_seconds)
    except KubeError as error:
        log.warning("reconcile of %s: %s", cluster, error)
        return 0


def _active_namespaces(cluster: Cluster) -> list[NamespaceRequest]:
    settled = timezone.now() - GONE_GRACE
    return list(
        NamespaceRequest.objects.filter(cluster=cluster, state=NS.ACTIVE, updated__lt=settled)
    )


def _compare_namespaces(
    active: list[NamespaceRequest], observed: list[Obj], gateway: ClusterGateway
) -> None:
    by_name = {o["metadata"]["name"]: o for o in observed}
    for ns in active:
        found = by_name.get(ns.name)
        if found is None or not owns(found, ns.labels()):
            _namespace_drifted(ns, gateway)
        elif uid_of(found) != ns.kube_uid:
            observations.namespace_uid_seen(namespace_request=ns, uid=uid_of(found))


def _reconcile_access(granted: list[NamespaceRequest], view: ClusterView) -> None:
    """A ServiceAccount or RoleBinding of ours removed outside the portal: grant it again."""
    if not granted:
        return
    present: dict[str, set[str]] = {}
    for kind in ("ServiceAccount", "RoleBinding"):
        found = view.owned(kind)
        if found is None:
            return  # not known: nothing to compare with this time
        present[kind] = {o["metadata"].get("namespace") for o in found}
    for ns in granted:
        missing = [kind for kind, namespaces in present.items() if ns.name not in namespaces]
        if missing:
            kinds = " and ".join(missing)
            message = state_messages.ACCESS_REMOVED % {"kinds": kinds, "namespace": ns.name}
            observations.namespace_access_lost(namespace_request=ns, message=message)


def _namespace_drifted(ns: NamespaceRequest, gateway: ClusterGateway) -> None:
    found = gateway.read("v1", "Namespace", None, ns.name)
    if found is None:
        message = state_messages.NAMESPACE_DELETED_OUTSIDE % {"namespace": ns.name}
        observations.namespace_drifted(namespace_request=ns, message=message)
    elif ns.kube_uid and uid_of(found) == ns.kube_uid:
        if not is_terminating(found):  # else: created again once it is gone
            gateway.apply(planned.namespace_manifest(ns.name, ns.labels()))
            message = state_messages.LABELS_RESTORED % {"namespace": ns.name}
            observations.labels_restored(obj=ns, message=message)
    else:
        message = state_messages.NAMESPACE_REPLACED % {"namespace": ns.name}
        observations.namespace_failed(namespace_request=ns, message=message)


def _ended_runs_with_live_pods(cluster: Cluster, view: ClusterView, before: datetime) -> list[int]:
    """Runs that ended (cancelled, or their claim released) while their Pod still runs and
    holds the GPU: the delete message was lost."""
    pods = [p for p in view.pods().items if label_keys.VERIFICATION_RUN in p.labels]
    live = {(p.namespace, p.name) for p in pods if p.phase not in TERMINAL_PHASES}
    if not live:
        return []
    runs = VerificationRun.objects.filter(
        claim__namespace_request__cluster=cluster,
        state__in=VerificationRun.FINAL_STATES,
        updated__lt=before,
        pod_name__in={name for _, name in live},
    ).select_related("claim__namespace_request")
    return [run.pk for run in runs if (run.claim.namespace, run.pod_name) in live]


# The request each label names, and the kinds the portal creates, in the order they are
# deleted (what is inside a namespace before the namespace).
REQUEST_LABELS: dict[str, type[Any]] = {
    label_keys.NAMESPACE_REQUEST: NamespaceRequest,
    label_keys.CLAIM_REQUEST: ClaimRequest,
    label_keys.VERIFICATION_RUN: VerificationRun,
    label_keys.WORKLOAD: Workload,
}
SWEPT_KINDS = (
    ("batch/v1", "Job"),
    ("networking.k8s.io/v1", "Ingress"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("v1", "ResourceQuota"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Namespace"),
)


def sweep_orphans() -> int:
    """sweep_cluster on every cluster from live lists, a one-off look (the shell, tests)."""
    removed = 0
    for cluster in Cluster.objects.all():
        gateway = gateway_for(cluster)
        try:
            removed += sweep_cluster(cluster, gateway, LiveView(gateway))
        except KubeError as error:
            log.warning("orphan sweep of %s: %s", cluster, error)
    return removed


def sweep_cluster(cluster: Cluster, gateway: ClusterGateway, view: ClusterView) -> int:
    """Delete the portal's objects in the cluster whose request is gone; count them."""
    found = [
        (version, kind, obj)
        for version, kind in SWEPT_KINDS
        for obj in view.owned(kind) or []  # a kind not known is swept another time
    ]
    orphans = _orphans([obj for _, _, obj in found])
    removed = 0
    for version, kind, obj in found:
        if id(obj) in orphans and not is_terminating(obj):  # one on its way out is gone
            metadata = obj["metadata"]
            namespace, name = metadata.get("namespace"), metadata["name"]
            if gateway.delete(version, kind, namespace, name, uid=uid_of(obj)):
                _record_orphan(cluster, kind, obj)
                removed += 1
    return removed


def _record_orphan(cluster: Cluster, kind: str, obj: dict[str, Any]) -> None:
    """A row on the cluster's trail per object deleted: what it was, where, its labels."""
    metadata = obj["metadata"]
    namespace, name = metadata.get("namespace") or "", metadata["name"]
    where = f"{namespace}/{name}" if namespace else name
    log.warning("deleted orphan %s %s: its request is gone", kind, where)
    audit.record(
        audit.Action.DELETED,
        kind=audit.Kind.CLUSTER,
        object_id=cluster.pk,
        name=cluster.name,
        message=state_messages.ORPHAN_DELETED % {"kind": kind, "where": where},
        before={
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": uid_of(obj),
            "labels": metadata.get("labels") or {},
        },
    )


def _orphans(objects: list[dict[str, Any]]) -> set[int]:
    """id() of each object naming a request that is not in the database."""
    named: dict[str, set[int]] = {label: set() for label in REQUEST_LABELS}
    for obj in objects:
        for label, value in _request_labels(obj).items():
            named[label].add(value)
    existing = {
        label: set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
        for label, model in REQUEST_LABELS.items()
        if (ids := named[label])
    }
    return {
        id(obj)
        for obj in objects
        if any(value not in existing[label] for label, value in _request_labels(obj).items())
    }


def _request_labels(obj: dict[str, Any]) -> dict[str, int]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {
        label: int(labels[label])
        for label in REQUEST_LABELS
        if str(labels.get(label, "")).isdigit()
    }
