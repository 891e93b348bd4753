"""The reconciler finishes approved work whose message was lost (real worker, kubesim)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from claims import services, sync
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.transitions import transition
from tests.fixtures.portal import wait_until

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


def state_of(claim: ClaimRequest) -> str:
    claim.refresh_from_db()
    return claim.state


def test_it_leaves_fresh_work_alone(alice: User, cluster: Cluster) -> None:
    claim = lost_approval(alice, cluster)
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=timezone.now())
    NamespaceRequest.objects.filter(pk=claim.namespace_request_id).update(updated=timezone.now())
    assert sync.reconcile(stale_seconds=60) == 0


def test_it_applies_a_claim_whose_message_was_lost(
    alice: User, cluster: Cluster, celery_worker_process: Any
) -> None:
    claim = lost_approval(alice, cluster)
    assert sync.reconcile() == 2  # the namespace and the claim
    wait_until(lambda: state_of(claim) == "waiting")
    claim.namespace_request.refresh_from_db()
    assert claim.namespace_request.state == "active"


def test_it_finishes_a_release_whose_message_was_lost(
    alice: User, cluster: Cluster, celery_worker_process: Any, kubesim_cluster: Any
) -> None:
    claim = lost_approval(alice, cluster)
    sync.reconcile()
    wait_until(lambda: state_of(claim) == "waiting")
    transition(claim, to="released", allowed=("waiting",), message="Released.")
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=timezone.now() - timedelta(hours=1))
    assert sync.reconcile() == 1
    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at is not None)
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims"
    assert kubesim_cluster.admin("GET", path)["items"] == []
