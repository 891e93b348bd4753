"""A client that behaves on a shared cluster: rate limited, following rotated credentials."""

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kubesim
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from claims.kube.ratelimit import TokenBucket
from tests.fixtures.kubesim import create_namespace
from tests.kube.clock import FakeClock


def recorded_waits(bucket_factory: Callable[..., TokenBucket]) -> tuple[TokenBucket, list[float]]:
    waits: list[float] = []
    return bucket_factory(sleep=waits.append), waits


def test_it_allows_a_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(5.0, 10, clock=clock, sleep=clock.sleep)
    started = clock.now

    for _ in range(10):
        bucket.acquire()
    burst_done = clock.now
    for _ in range(5):
        bucket.acquire()

    assert burst_done == started
    assert clock.now - started == pytest.approx(1.0)  # 5 more at 5 a second


def test_it_refills_while_idle_but_never_beyond_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(5.0, 10, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        bucket.acquire()

    clock.now += 3600
    before = clock.now
    for _ in range(11):
        bucket.acquire()

    assert clock.now - before == pytest.approx(0.2)


def test_it_paces_concurrent_callers_one_after_another() -> None:
    clock = FakeClock()  # frozen: every wait is measured from the same instant
    bucket, waits = recorded_waits(lambda **kw: TokenBucket(5.0, 10, clock=clock, **kw))
    threads = [threading.Thread(target=bucket.acquire) for _ in range(30)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(waits) == pytest.approx([0.2 * n for n in range(1, 21)])


def test_it_can_be_turned_off() -> None:
    bucket, waits = recorded_waits(lambda **kw: TokenBucket(0, 1, **kw))

    for _ in range(100):
        bucket.acquire()

    assert waits == []


def test_the_gateway_paces_its_requests(kubesim_cluster: Any) -> None:
    clock = FakeClock()
    gw = ClusterGateway(
        kubeconfig_path=kubesim_cluster.kubeconfig, qps=5, burst=10, clock=clock, sleep=clock.sleep
    )
    started = clock.now

    for _ in range(15):
        gw.read("v1", "Namespace", None, "default")

    assert clock.now - started == pytest.approx(1.0)


def write_kubeconfig(path: Path, handle: kubesim.Handle, token: str) -> None:
    kubesim.write_kubeconfig(str(path), kubesim.kubeconfig_text(handle.url, handle.ca_pem, token))


def test_it_takes_a_rotated_token_from_the_same_file(kubesim_cluster: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, kubesim_cluster, "not-the-token")
    gw = ClusterGateway(kubeconfig_path=str(path))
    with pytest.raises(PermanentKubeError) as caught:
        gw.read("v1", "Namespace", None, "default")
    assert caught.value.status == 401

    write_kubeconfig(path, kubesim_cluster, kubesim_cluster.token)

    assert gw.read("v1", "Namespace", None, "default") is not None


def test_it_notices_a_changed_file_at_most_once_a_second(
    kubesim_cluster: Any, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, kubesim_cluster, kubesim_cluster.token)
    clock = FakeClock()
    gw = ClusterGateway(kubeconfig_path=str(path), clock=clock, sleep=clock.sleep)
    assert gw.read("v1", "Namespace", None, "default") is not None
    configuration = gw.connection.configuration

    write_kubeconfig(path, kubesim_cluster, kubesim_cluster.token + "-renewed")
    clock.now += 0.5
    gw.read("v1", "Namespace", None, "default")
    unchanged = gw.connection.configuration
    clock.now += 0.6
    with pytest.raises(PermanentKubeError):
        gw.read("v1", "Namespace", None, "default")

    assert unchanged is configuration
    assert gw.connection.configuration is not configuration


def token_without_rights(handle: kubesim.Handle) -> str:
    """A ServiceAccount's token: authenticated, but bound to no role."""
    namespace = create_namespace(handle)
    with ClusterGateway(kubeconfig_path=handle.kubeconfig) as admin:
        admin.apply(
            manifests.service_account_manifest(namespace=namespace, name="nobody", labels={})
        )
        return admin.request_token(namespace, "nobody", expiration_seconds=600)[0]


@pytest.mark.parametrize("status", [401, 403])
def test_it_retries_a_refusal_exactly_once(
    kubesim_private: Any, tmp_path: Path, status: int
) -> None:
    path = tmp_path / "kubeconfig"
    token = "not-the-token" if status == 401 else token_without_rights(kubesim_private)
    write_kubeconfig(path, kubesim_private, token)
    # kubesim counts only the requests it lets through, not refused ones: count them with
    # the limiter, which lets the first request through and makes each further one wait 1 s.
    clock = FakeClock()
    gw = ClusterGateway(kubeconfig_path=str(path), qps=1, burst=1, clock=clock, sleep=clock.sleep)
    started = clock.now

    with pytest.raises(PermanentKubeError) as caught:
        gw.read("v1", "Namespace", None, "default")

    assert caught.value.status == status
    assert clock.now - started == pytest.approx(1.0)  # two requests: the first and one retry


def test_a_successful_retry_reaches_the_cluster_once(kubesim_private: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, kubesim_private, "not-the-token")
    gw = ClusterGateway(kubeconfig_path=str(path))
    write_kubeconfig(path, kubesim_private, kubesim_private.token)  # within the same second
    kubesim_private.admin("POST", "/_kubesim/counters/reset")

    assert gw.read("v1", "Namespace", None, "default") is not None

    counters = kubesim_private.admin("GET", "/_kubesim/counters")["requests"]
    assert counters == {"get namespaces": 1}
