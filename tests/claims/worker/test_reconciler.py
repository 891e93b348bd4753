"""The reconciler finishes approved work whose message was lost (real worker, kubesim)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import kubesim
from claims.domain import services
from claims.domain.transitions import transition
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    Workload,
)
from claims.worker import reconciler
from tests.fixtures.portal import allocation_in, state_of, wait_until
from tests.fixtures.workloads import BATCH, seeded_profile

pytestmark = pytest.mark.django_db(transaction=True)


def lost_approval(alice: User, cluster: Cluster) -> ClaimRequest:
    """An approved claim whose task message never reached a worker."""
    ns = services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"lost-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    transition(ns, to="approved", allowed=("pending",), message="Approved.")
    transition(claim, to="approved", allowed=("pending",), message="Approved.")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=an_hour_ago)
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=an_hour_ago)
    return claim


def test_it_leaves_fresh_work_alone(alice: User, cluster: Cluster) -> None:
    claim = lost_approval(alice, cluster)
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=timezone.now())
    NamespaceRequest.objects.filter(pk=claim.namespace_request_id).update(updated=timezone.now())
    assert reconciler.reconcile(stale_seconds=60) == 0


def test_it_applies_a_claim_whose_message_was_lost(
    alice: User, cluster: Cluster, celery_worker_process: Any
) -> None:
    claim = lost_approval(alice, cluster)
    assert reconciler.reconcile() == 2  # the namespace and the claim
    wait_until(lambda: state_of(claim) == "waiting")
    claim.namespace_request.refresh_from_db()
    assert claim.namespace_request.state == "active"


def test_it_finishes_a_release_whose_message_was_lost(
    alice: User, cluster: Cluster, celery_worker_process: Any, kubesim_cluster: Any
) -> None:
    claim = lost_approval(alice, cluster)
    reconciler.reconcile()
    wait_until(lambda: state_of(claim) == "waiting")
    transition(claim, to="released", allowed=("waiting",), message="Released.")
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=timezone.now() - timedelta(hours=1))
    assert reconciler.reconcile() == 1
    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at is not None)
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims"
    assert kubesim_cluster.admin("GET", path)["items"] == []


def pod_phases(handle: kubesim.Handle, namespace: str) -> dict[str, str]:
    pods = handle.admin("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {pod["metadata"]["name"]: pod.get("status", {}).get("phase", "") for pod in pods}


def cancel_without_message(run: VerificationRun) -> bool:
    """What verification_run_cancel writes, with its delete message lost on the way."""
    going = tuple(set(VerificationRun.State) - set(VerificationRun.FINAL_STATES))
    return transition(
        run, to="failed", allowed=going, message="Cancelled.", finished_at=timezone.now()
    )


def test_the_loop_deletes_the_pod_of_a_cancelled_run_whose_message_was_lost(
    alice: User,
    slow_cluster: Cluster,
    slow_kubesim: kubesim.Handle,
    celery_worker_process: Any,
    settings: Any,
) -> None:
    claim = lost_approval(alice, slow_cluster)
    reconciler.reconcile()
    wait_until(lambda: state_of(claim) == "waiting")
    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: pod_phases(slow_kubesim, claim.namespace).get(run.pod_name) == "Running")
    assert allocation_in(slow_kubesim, claim)

    # The cluster's loop (cluster_loops) finds it in its caches at its next resync (every
    # 2 s here), once the run ended RECONCILE_STALE_SECONDS ago: at once, here.
    settings.RECONCILE_STALE_SECONDS = 0
    wait_until(lambda: cancel_without_message(run))
    wait_until(lambda: pod_phases(slow_kubesim, claim.namespace) == {})
    wait_until(lambda: allocation_in(slow_kubesim, claim) is None)
    wait_until(lambda: state_of(claim) == "waiting")
    assert claim.allocation is None


def test_it_starts_and_stops_workloads_whose_messages_were_lost(
    alice: User, cluster: Cluster, celery_worker_process: Any, kubesim_cluster: Any
) -> None:
    """The row first, the task after: a worker or Redis that fails in between leaves a
    pending workload (or a stopped one with its Job still there) for the reconciler."""
    claim = lost_approval(alice, cluster)
    reconciler.reconcile()
    wait_until(lambda: state_of(claim) == "waiting")
    batch = seeded_profile(BATCH)
    workload = Workload.objects.create(
        claim=claim, owner=alice, profile=batch, profile_name=batch.name, kind="job",
        image=batch.image, command=batch.command, name=f"train-job-{uuid.uuid4().hex[:6]}",
        updated=timezone.now() - timedelta(hours=1),
    )  # fmt: skip
    assert reconciler.reconcile() == 1
    wait_until(lambda: state_of(workload) == "started")
    jobs = f"/apis/batch/v1/namespaces/{claim.namespace}/jobs"
    assert [j["metadata"]["name"] for j in kubesim_cluster.admin("GET", jobs)["items"]] == [
        workload.name
    ]
    # Stopped whether the loop has seen its Pod run yet or not (a lost race is read again).
    stopped = ("started", "running")
    wait_until(lambda: transition(workload, to="stopped", allowed=stopped, message="Stopped."))
    # Stale at once: the cluster loop may note its Pod again (and touch the row) meanwhile.
    assert reconciler.reconcile(stale_seconds=0) == 1
    wait_until(lambda: Workload.objects.get(pk=workload.pk).cleaned_up_at is not None)
    live = kubesim_cluster.admin("GET", jobs)["items"]
    assert all(j["metadata"].get("deletionTimestamp") for j in live)
