"""An outage longer than a task's retries fails nothing: the work waits for the cluster and
the reconciler finishes it once the cluster answers again (kubesim's fault API)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import kubesim
from claims.clusters import gateways
from claims.models import AuditEvent, ClaimRequest, Cluster
from claims.worker import cluster_steps, reconciler, tasks
from tests.claims.worker.test_cluster_ops import approved_claim
from tests.fixtures.portal import register_cluster

EVERY_API_PATH = {"path": "^/(api|apis|version)", "error_codes": [503], "error_rate": 1.0}


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Any:
    yield register_cluster(kubesim_private, name="flaky")
    gateways.forget_gateways()


def out_of_retries(claim: ClaimRequest) -> None:
    """The last try of apply_claim, as Celery runs it after MAX_RETRIES retries."""
    tasks.apply_claim.apply(args=(claim.pk,), retries=tasks.MAX_RETRIES)


def test_work_the_cluster_never_answered_waits_instead_of_failing(
    alice: User, private_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    claim = approved_claim(alice, private_cluster)
    kubesim_private.admin("POST", "/_kubesim/faults", json=EVERY_API_PATH)
    out_of_retries(claim)
    claim.refresh_from_db()
    assert claim.state in ("approved", "applying")
    assert claim.state_message.startswith("Waiting for the cluster (trying again in 30 s)")
    assert claim.cluster_waits == 1
    out_of_retries(claim)  # a second round waits twice as long
    claim.refresh_from_db()
    assert "trying again in 60 s" in claim.state_message
    waits = AuditEvent.objects.filter(
        object_kind="claim_request", object_id=claim.pk, message__startswith="Waiting for the cl"
    )
    assert waits.count() == 2

    # Not due yet: the reconciler leaves it; once due, it sends it again.
    assert reconciler.reconcile(stale_seconds=0) == 0 or claim.next_attempt_at > timezone.now()
    kubesim_private.admin("DELETE", "/_kubesim/faults")
    past = timezone.now() - timedelta(seconds=1)
    ClaimRequest.objects.filter(pk=claim.pk).update(next_attempt_at=past)
    assert reconciler.reconcile(stale_seconds=0) >= 1
    cluster_steps.apply_claim(ClaimRequest.objects.get(pk=claim.pk))  # what that message does
    claim.refresh_from_db()
    assert (claim.state, claim.cluster_waits, claim.next_attempt_at) == ("waiting", 0, None)


def test_a_refusal_is_still_final(
    alice: User, private_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    claim = approved_claim(alice, private_cluster)
    # A name the portal's form would refuse: the API server's 422.
    ClaimRequest.objects.filter(pk=claim.pk).update(name="Not_A_Name")
    out_of_retries(ClaimRequest.objects.get(pk=claim.pk))
    claim.refresh_from_db()
    assert claim.state == "failed"
    assert "Not_A_Name" in claim.state_message
