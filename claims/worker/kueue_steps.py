"""Following Kueue where the cluster runs it: what Kueue's Workload for each of the portal's
Jobs says (pending with Kueue's message, quota reserved, admitted, evicted, finished) and,
where its visibility API is served, the Job's position in its LocalQueue.

Kueue decides; the portal only reads: the Workloads come from the loop's informer (one watch
of every Workload in the cluster: Kueue does not copy the portal's labels to them), the
positions from one visibility read per LocalQueue with a pending Job, per pass. Run by the
sync; safe to run twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings

from claims.domain import workload_observations as observed
from claims.kube import kueue
from claims.kube.gateway import ClusterGateway, KubeError
from claims.kube.informer import Informer
from claims.kube.kueue import KueueWorkload
from claims.models import Cluster, Workload

log = logging.getLogger(__name__)


def workloads_informer(
    gateway: ClusterGateway, changed: Callable[[], None]
) -> Informer[KueueWorkload]:
    """The cluster loop's watch of Kueue's Workloads: every one, as Kueue does not copy the
    portal's labels to them (the ClusterRole allows list and watch)."""
    return Informer(
        gateway,
        "Workload",
        "",
        kueue.kueue_workload,
        changed,
        watch_seconds=settings.FOLLOWER_WATCH_SECONDS,
        refused_retry_seconds=settings.FOLLOWER_REFUSED_RETRY_SECONDS,
    )


def _positions(gateway: ClusterGateway, namespace: str, queue: str) -> dict[str, int]:
    """Extra, like a Pod's Events: a visibility API that fails (Kueue's is an aggregated API
    server that may be down) only costs the positions, not the cluster's good name."""
    try:
        return kueue.positions(gateway.read_path(kueue.pending_path(namespace, queue)))
    except KubeError as error:
        log.warning("Kueue's pending workloads of %s/%s: %s", namespace, queue, error)
        return {}


def follow_kueue(
    cluster: Cluster,
    workloads: list[Workload],
    seen: list[KueueWorkload] | None,
    gateway: ClusterGateway,
) -> None:
    """Write on each followed workload what Kueue says of its Job."""
    queued = [w for w in workloads if w.kueue_queue and w.kube_uid]
    if not cluster.kueue or not queued or seen is None:
        return
    by_job = {k.job_uid: k for k in seen if k.job_uid}
    asked: dict[tuple[str, str], dict[str, int]] = {}
    for workload in queued:
        found = by_job.get(workload.kube_uid)
        if found is None:
            continue  # Kueue has not made its Workload yet
        position = None
        if found.state == kueue.PENDING and cluster.kueue_visibility:
            key = (found.namespace, found.queue or workload.kueue_queue)
            if key not in asked:
                asked[key] = _positions(gateway, *key)
            position = asked[key].get(found.name)
        observed.workload_kueue_seen(
            workload=workload, state=found.state, message=found.message, position=position
        )
