"""The portal's rate limit per cluster, shared by its processes through Redis, and the
server's own word: a 429 (API Priority and Fairness) is sent again after its Retry-After."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from django.conf import settings

import kubesim
from claims.kube.gateway import ClusterGateway, TransientKubeError
from claims.kube.ratelimit import SharedTokenBucket
from tests.fixtures.kubesim import create_namespace
from tests.kube.clock import FakeClock


def shared(client: Any, key: str, waits: list[float], **options: Any) -> SharedTokenBucket:
    return SharedTokenBucket(client, key, 10.0, 5, sleep=waits.append, **options)


def test_processes_share_one_bucket_per_cluster() -> None:
    """Two processes (two buckets on one key): a burst of 5 in all, then 10 a second in all.
    The slots are reserved on the Redis server's clock, so each later caller waits its turn
    (the waits are recorded, not slept: each is measured from about the same instant)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = f"test-kube-rate:{uuid.uuid4().hex}"
    waits: list[float] = []
    first, second = shared(client, key, waits), shared(client, key, waits)
    for _ in range(5):
        first.acquire()
        second.acquire()
    assert waits[0] > 0  # the burst of 5 was used up by the two together, after 5 calls
    assert len(waits) == 5
    assert waits == sorted(waits)
    assert waits[-1] == pytest.approx(0.5, abs=0.1)  # the tenth call: 5 past the burst
    client.delete(key)


def test_without_redis_each_process_keeps_the_limit_itself_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    clock = FakeClock()
    waits: list[float] = []
    bucket = shared(client, "nowhere", waits, clock=clock)
    for _ in range(7):
        bucket.acquire()  # no exception: the cluster's work goes on
    assert waits == pytest.approx([0.1, 0.2])  # the local bucket: 5 at once, then 10 a second
    assert caplog.text.count("in this process only") == 1  # then 10 s without asking Redis


def test_a_429_is_sent_again_after_its_retry_after(kubesim_private: kubesim.Handle) -> None:
    namespace = create_namespace(kubesim_private)
    fault = {"path": f"/api/v1/namespaces/{namespace}$", "error_codes": [429], "error_rate": 1}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the server is ready again once the client waited
        slept.append(seconds)
        if len(slept) == 3:
            kubesim_private.admin("DELETE", "/_kubesim/faults")

    try:
        with ClusterGateway(kubesim_private.kubeconfig, qps=0, sleep=sleep) as gateway:
            found = gateway.read("v1", "Namespace", None, namespace)
    finally:
        kubesim_private.admin("DELETE", "/_kubesim/faults")
    assert found is not None and found["metadata"]["name"] == namespace
    assert slept == [1.0, 1.0, 1.0]  # kubesim's Retry-After: 1, as the API server's


def test_a_server_that_keeps_refusing_is_left_to_the_callers_back_off(
    kubesim_private: kubesim.Handle,
) -> None:
    namespace = create_namespace(kubesim_private)
    path = f"/api/v1/namespaces/{namespace}$"
    slept: list[float] = []
    with ClusterGateway(kubesim_private.kubeconfig, qps=0, sleep=slept.append) as gateway:
        for fault in (
            {"path": path, "error_codes": [429], "error_rate": 1},  # 10 times, then given up
            {"path": path, "error_codes": [503], "outage_seconds": 60},  # no Retry-After
        ):
            kubesim_private.admin("POST", "/_kubesim/faults", fault)
            try:
                with pytest.raises(TransientKubeError):
                    gateway.read("v1", "Namespace", None, namespace)
            finally:
                kubesim_private.admin("DELETE", "/_kubesim/faults")
    assert slept == [1.0] * 10
