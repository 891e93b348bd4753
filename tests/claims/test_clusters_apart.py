"""Each cluster is followed by its own task: a slow cluster delays no other (real worker)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

import kubesim
from claims import cluster_ops
from claims.models import Cluster
from tests.claims.test_cluster_ops import approved_claim
from tests.fixtures.portal import register_cluster, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def syncs_seen(cluster: Cluster, seen: set[Any]) -> int:
    seen.add(Cluster.objects.get(pk=cluster.pk).last_synced_at)
    return len(seen - {None})


def test_a_slow_cluster_does_not_hold_up_the_others(
    alice: User,
    kubesim_cluster: kubesim.Handle,
    kubesim_private: kubesim.Handle,
    celery_beat_process: Any,
) -> None:
    # Named to sort first: one task looping over the clusters would sync it first.
    slow = register_cluster(kubesim_private, name="a-slow")
    cluster_ops.apply_claim(approved_claim(alice, slow))  # something to follow there
    fault = {"path": "resourceclaims$", "latency_ms": 8000}
    kubesim_private.admin("POST", "/_kubesim/faults", json=fault)
    fast = register_cluster(kubesim_cluster, name="b-fast")
    fast_syncs: set[Any] = set()
    slow_syncs: set[Any] = set()
    # Beat sends a sync every 0.3 s; the slow cluster's take 8 s each. Synced in one loop, each
    # fast sync would wait for a slow one: here four come while at most one slow one ends.
    wait_until(lambda: syncs_seen(fast, fast_syncs) >= 4, timeout=60)
    assert syncs_seen(slow, slow_syncs) <= 1
    assert Cluster.objects.get(pk=fast.pk).last_error == ""
