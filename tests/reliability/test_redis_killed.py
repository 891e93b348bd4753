"""The broker killed with SIGKILL mid-flow and started again empty: every message it held is
gone, and the work is sent again from the database (the reconciler), nothing twice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

import kubesim
from claims.clusters import gateways
from claims.models import Cluster
from tests.fixtures.portal import _point_celery_at_test_broker, register_cluster, wait_until
from tests.reliability.checks import applied, approve_all, check_each_applied_once, pending_claims
from tests.reliability.conftest import figure
from tests.reliability.processes import (
    free_port,
    kill_group,
    kill_group_and_wait,
    point_celery_at,
    redis_server_binary,
    start_redis,
    start_worker,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server"),
]
CLAIMS = 30
WHILE_DOWN = 10  # approvals while the broker is down: each waits out kombu's publish retries


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="private")
    gateways.forget_gateways()


@pytest.fixture
def own_redis(celery_processes: Any, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A port for a Redis of the test's own, this process publishing there meanwhile."""
    port = free_port()
    point_celery_at(f"redis://127.0.0.1:{port}/0")
    yield port, tmp_path
    _point_celery_at_test_broker()


def test_a_broker_killed_and_restarted_empty_loses_no_work(
    alice: User,
    carol: User,
    private_cluster: Cluster,
    kubesim_private: kubesim.Handle,
    own_redis: tuple[int, Path],
) -> None:
    port, folder = own_redis
    claims = pending_claims(alice, private_cluster, "broker", CLAIMS)
    kubesim_private.admin(
        "POST", "/_kubesim/faults", json={"path": "resourceclaims", "latency_ms": 40}
    )
    redis = start_redis(port, folder)
    worker = start_worker(folder / "worker", {"CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0"})
    try:
        approve_all(carol, claims[:-WHILE_DOWN])
        wait_until(lambda: applied(claims) >= 3, timeout=60)
        kill_group_and_wait(redis)
        at_kill = applied(claims)
        started = time.monotonic()
        approve_all(carol, claims[-WHILE_DOWN:])  # their messages find no broker
        down_for = time.monotonic() - started
        redis = start_redis(port, folder)
        wait_until(lambda: applied(claims) == CLAIMS, timeout=120)
    finally:
        kill_group(worker)
        kill_group(redis)
    result = check_each_applied_once(kubesim_private, claims)
    killed = f"SIGKILL with {at_kill}/{CLAIMS} applied"
    killed += f", {WHILE_DOWN} approved while it was down ({down_for:.0f} s)"
    figure("redis killed", f"{killed}; restarted empty; then {result}")
