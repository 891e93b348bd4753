"""The cluster unreachable for longer than the tasks' retry budget, then back on the same
address; and the API server answering 429, 500 or not at all (kubesim's fault API).

kubesim restarts from its state file, as a real API server comes back with its etcd: what was
created before the outage is still there, so the portal must adopt, not duplicate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User

import kubesim
from claims.clusters import gateways
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from tests.fixtures.portal import register_cluster, state_of, wait_until
from tests.reliability.checks import (
    APPLIED,
    applied,
    approve_all,
    check_each_applied_once,
    pending_claims,
)
from tests.reliability.conftest import figure
from tests.reliability.processes import kill_group, start_worker

pytestmark = pytest.mark.django_db(transaction=True)
CLAIMS = 10
# The worker's budget: 2 retries 1 and 2 s apart, then waiting 2 s, 4 s, 4 s ... between
# rounds (8 retries up to 30 s apart and 30 s to 10 min in production).
SHORT_BUDGET = {
    "KUBE_TASK_MAX_RETRIES": "2",
    "CLUSTER_WAIT_FIRST_SECONDS": "2",
    "CLUSTER_WAIT_MAX_SECONDS": "4",
}
WAITING = "Waiting for the cluster"


class RestartableKubesim:
    """A kubesim that stops and starts again on the same port, token, kubeconfig and state."""

    def __init__(self, folder: Path) -> None:
        self.state, self.kubeconfig = str(folder / "state.json"), str(folder / "kubeconfig")
        self.handle = kubesim.start(speed=50, state=self.state, kubeconfig=self.kubeconfig)
        self.port = urlsplit(self.handle.url).port

    def stop(self) -> None:
        self.handle.stop()

    def start_again(self) -> None:
        self.handle = kubesim.start(
            port=self.port or 0,
            speed=50,
            state=self.state,
            kubeconfig=self.kubeconfig,
            token=self.handle.token,
        )


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableKubesim]:
    cluster = RestartableKubesim(tmp_path)
    yield cluster
    cluster.stop()
    gateways.forget_gateways()


def waited_twice_for_the_cluster(claims: list[ClaimRequest]) -> bool:
    """Each claim used up its retries, waited, was sent again by the reconciler, and used
    up its retries again."""
    rows = ClaimRequest.objects.filter(pk__in=[claim.pk for claim in claims])
    return all(row.state_message.startswith(WAITING) and row.cluster_waits >= 2 for row in rows)


def test_an_outage_longer_than_the_retry_budget_fails_nothing(
    alice: User,
    carol: User,
    restartable: RestartableKubesim,
    celery_processes: Any,
    tmp_path: Path,
) -> None:
    cluster = register_cluster(restartable.handle, name="restartable")
    claims = pending_claims(alice, cluster, "outage", CLAIMS)
    before, during = claims[: CLAIMS // 2], claims[CLAIMS // 2 :]
    worker = start_worker(tmp_path / "worker", SHORT_BUDGET)
    try:
        approve_all(carol, before)
        wait_until(lambda: applied(before) == len(before), timeout=30)
        restartable.stop()
        down_at = time.monotonic()
        approve_all(carol, during)
        wait_until(lambda: waited_twice_for_the_cluster(during), timeout=60)
        waited = time.monotonic() - down_at
        assert not ClaimRequest.objects.filter(state="failed").exists()
        assert not NamespaceRequest.objects.filter(state="failed").exists()
        restartable.start_again()
        down_for = time.monotonic() - down_at
        wait_until(lambda: applied(claims) == CLAIMS, timeout=60)
        converged = time.monotonic() - down_at - down_for
    finally:
        kill_group(worker)
    result = check_each_applied_once(restartable.handle, claims)
    outage = f"down {down_for:.0f} s (retry budget 3 s): the {len(during)} approved meanwhile"
    outage += f" waited twice for the cluster in {waited:.0f} s, 0 failed;"
    outage += f" converged {converged:.0f} s after it came back"
    figure("cluster down", f"{outage}; {result}")


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="private")
    gateways.forget_gateways()


FAULTS = {
    "429": {"path": "resourceclaims", "error_codes": [429], "error_rate": 1.0},
    "500": {"path": "resourceclaims", "error_codes": [500], "error_rate": 1.0},
    # Only the create (POST .../resourceclaims) hangs, longer than the client's 10 s read
    # timeout: the server still creates it after the client gave up.
    "hang": {"path": "resourceclaims$", "latency_ms": 11_000},
}


@pytest.mark.parametrize("fault", FAULTS)
def test_it_converges_through_injected_faults(
    fault: str,
    alice: User,
    carol: User,
    private_cluster: Cluster,
    kubesim_private: kubesim.Handle,
    celery_worker_process: Any,
) -> None:
    claims = pending_claims(alice, private_cluster, f"fault-{fault}", 3)
    kubesim_private.admin("POST", "/_kubesim/faults", json=FAULTS[fault])
    started = time.monotonic()
    approve_all(carol, claims)
    # Every claim met the fault and has a retry scheduled; then the fault ends.
    retried = ClaimRequest.objects.filter(
        pk__in=[c.pk for c in claims], next_attempt_at__isnull=False
    )
    wait_until(lambda: retried.count() == len(claims), timeout=30)
    kubesim_private.admin("DELETE", "/_kubesim/faults")
    wait_until(lambda: applied(claims) == len(claims), timeout=60)
    took = time.monotonic() - started
    assert all(state_of(claim) == APPLIED for claim in claims)
    result = check_each_applied_once(kubesim_private, claims)
    figure(
        f"fault {fault}",
        f"until each claim had a retry scheduled; then {result}; {took:.0f} s in all",
    )
