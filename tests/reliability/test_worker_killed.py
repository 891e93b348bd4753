"""A worker killed with SIGKILL (its whole process group) while it applies: a new worker
finishes everything, nothing twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

import kubesim
from claims.clusters import gateways
from claims.models import ClaimRequest, Cluster
from tests.fixtures.portal import register_cluster, wait_until
from tests.reliability.checks import (
    applied,
    approve_all,
    check_each_applied_once,
    pending_claims,
)
from tests.reliability.conftest import figure
from tests.reliability.processes import kill_group, kill_group_and_wait, start_worker

pytestmark = pytest.mark.django_db(transaction=True)
CLAIMS = 30


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="private")
    gateways.forget_gateways()


def test_a_killed_worker_loses_nothing_and_does_nothing_twice(
    alice: User,
    carol: User,
    private_cluster: Cluster,
    kubesim_private: kubesim.Handle,
    celery_processes: Any,
    tmp_path: Path,
) -> None:
    claims = pending_claims(alice, private_cluster, "killed", CLAIMS)
    # 40 ms a request: the applies take seconds, time to kill the worker in their middle.
    slow = {"path": "resourceclaims", "latency_ms": 40}
    kubesim_private.admin("POST", "/_kubesim/faults", json=slow)
    worker = start_worker(tmp_path / "first")
    try:
        approve_all(carol, claims)
        wait_until(lambda: applied(claims) >= 3, timeout=60)
        kill_group_and_wait(worker)
        at_kill = applied(claims)
        in_flight = ClaimRequest.objects.filter(state="applying").count()
        assert at_kill < CLAIMS, "the worker finished before it was killed"
        worker = start_worker(tmp_path / "second")
        wait_until(lambda: applied(claims) == CLAIMS, timeout=120)
    finally:
        kill_group(worker)
    result = check_each_applied_once(kubesim_private, claims)
    killed = f"SIGKILL with {at_kill}/{CLAIMS} applied, {in_flight} mid-apply"
    figure("worker killed", f"{killed}; then {result}")
