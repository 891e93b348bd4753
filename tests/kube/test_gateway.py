import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

import kubesim
from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError, TransientKubeError

T = TypeVar("T")
GPU_CLASS = "gpu.nvidia.com"
NO_SUCH_GPU = "device.attributes['gpu.nvidia.com'].productName == 'NONEXISTENT-GPU-XYZ'"


def wait_for(read: Callable[[], T], done: Callable[[T], bool], seconds: float = 15) -> T:
    deadline = time.monotonic() + seconds
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


@pytest.fixture(params=["v1", "v1beta1-only"])
def cluster(request: pytest.FixtureRequest) -> Any:
    name = "kubesim_cluster" if request.param == "v1" else "kubesim_v1beta1_cluster"
    return request.getfixturevalue(name)


@pytest.fixture
def gateway(cluster: Any) -> Iterator[ClusterGateway]:
    with ClusterGateway(kubeconfig_path=cluster.kubeconfig) as gw:
        yield gw


@pytest.fixture
def run_id() -> str:
    return uuid.uuid4().hex[:8]


def labels(run_id: str) -> dict[str, str]:
    return {"gpu-portal.io/verification-run": run_id}


def selector(run_id: str) -> str:
    return f"gpu-portal.io/verification-run={run_id}"


def apply_claim(gw: ClusterGateway, run_id: str, name: str, **fields: Any) -> dict:
    version = gw.discover().preferred_resource_version
    claim = manifests.resource_claim_manifest(
        api_version=version,
        namespace=f"t-{run_id}",
        name=name,
        device_class=GPU_CLASS,
        count=fields.pop("count", None),
        labels=labels(run_id),
        **fields,
    )
    return gw.apply(claim)


def apply_namespace_claim_and_pod(gw: ClusterGateway, run_id: str, **claim_fields: Any) -> None:
    gw.apply(manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id)))
    apply_claim(gw, run_id, "gpu-claim", **claim_fields)
    pod = manifests.verification_pod_manifest(
        namespace=f"t-{run_id}", name="pod1", claim_name="gpu-claim", labels=labels(run_id)
    )
    gw.apply(pod)


def test_it_discovers_the_served_dra_versions(kubesim_cluster: Any) -> None:
    with ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as gw:
        info = gw.discover()

    assert info.server_version == "v1.34.1"
    assert set(info.resource_versions) == {"v1", "v1beta2", "v1beta1"}
    assert info.preferred_resource_version == "v1"


def test_it_falls_back_to_v1beta1_on_the_seeds_platform(kubesim_v1beta1_cluster: Any) -> None:
    with ClusterGateway(kubeconfig_path=kubesim_v1beta1_cluster.kubeconfig) as gw:
        info = gw.discover()

    assert info.server_version == "v1.33.5"
    assert info.resource_versions == ["v1beta1"]
    assert info.preferred_resource_version == "v1beta1"


def test_it_keeps_clusters_apart_in_one_process(
    kubesim_cluster: Any, kubesim_v1beta1_cluster: Any
) -> None:
    default_host = client.Configuration.get_default_copy().host

    with (
        ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as first,
        ClusterGateway(kubeconfig_path=kubesim_v1beta1_cluster.kubeconfig) as second,
    ):
        assert first.discover().preferred_resource_version == "v1"
        assert second.discover().preferred_resource_version == "v1beta1"

    assert client.Configuration.get_default_copy().host == default_host


def test_it_applies_idempotently(gateway: ClusterGateway, run_id: str) -> None:
    namespace = manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id))
    first_namespace = gateway.apply(namespace)
    first_claim = apply_claim(gateway, run_id, "gpu-claim", count=2)

    again_namespace = gateway.apply(namespace)
    again_claim = apply_claim(gateway, run_id, "gpu-claim", count=2)

    assert first_claim["metadata"]["uid"] == again_claim["metadata"]["uid"]
    rv = again_claim["metadata"]["resourceVersion"]
    assert rv == first_claim["metadata"]["resourceVersion"]
    assert (
        again_namespace["metadata"]["resourceVersion"]
        == (first_namespace["metadata"]["resourceVersion"])
    )


def test_it_sends_the_claim_in_the_version_the_cluster_serves(
    gateway: ClusterGateway, run_id: str
) -> None:
    gateway.apply(manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id)))

    applied = apply_claim(gateway, run_id, "gpu-claim")

    version = gateway.discover().preferred_resource_version
    assert applied["apiVersion"] == f"resource.k8s.io/{version}"
    request = applied["spec"]["devices"]["requests"][0]
    fields = request if version == "v1beta1" else request["exactly"]
    assert fields["deviceClassName"] == GPU_CLASS


def test_it_sees_the_allocation_once_the_pod_runs(gateway: ClusterGateway, run_id: str) -> None:
    apply_namespace_claim_and_pod(gateway, run_id)

    claims = wait_for(
        lambda: gateway.list_claims(selector(run_id)), lambda cs: bool(cs) and cs[0].allocated
    )

    [claim] = claims
    assert claim.allocated
    assert claim.node is not None
    [device] = claim.devices
    assert (device.request, device.driver) == ("gpu", GPU_CLASS)
    assert device.pool and device.device.startswith("gpu-")
    assert claim.reserved_for == ["pod1"]
    pods = wait_for(
        lambda: gateway.list_pods(selector(run_id)), lambda ps: ps[0].phase == "Succeeded"
    )
    assert pods[0].phase == "Succeeded"
    assert pods[0].node == claim.node
    assert [(c.name, c.state, c.exit_code) for c in pods[0].containers] == [
        ("ctr0", "terminated", 0),
        ("ctr1", "terminated", 0),
    ]
    assert pods[0].finished_at is not None


def test_it_lists_the_gpus_with_their_attributes(gateway: ClusterGateway) -> None:
    devices = [d for d in gateway.list_devices() if d.driver == GPU_CLASS]

    assert len(devices) == 8
    for device in devices:
        assert device.node and device.pool
        assert isinstance(device.attributes["productName"], str)
        assert device.attributes["productName"].startswith("NVIDIA ")
        assert device.attributes["type"] == "gpu"
        assert str(device.attributes["cudaComputeCapability"]).count(".") == 2
        assert isinstance(device.capacity["memory"], str)
    h100 = next(d for d in devices if d.attributes["productName"] == "NVIDIA H100 80GB HBM3")
    assert h100.attributes["cudaComputeCapability"] == "9.0.0"
    assert h100.capacity["memory"] == "81559Mi"


def test_it_lists_the_device_classes(gateway: ClusterGateway) -> None:
    classes = {c.name: c for c in gateway.list_device_classes()}

    assert GPU_CLASS in classes
    assert any("gpu.nvidia.com" in s for s in classes[GPU_CLASS].selectors)


def test_it_reads_logs_incrementally(gateway: ClusterGateway, run_id: str) -> None:
    apply_namespace_claim_and_pod(gateway, run_id)
    wait_for(lambda: gateway.list_pods(selector(run_id)), lambda ps: ps[0].phase == "Succeeded")

    lines = gateway.read_log(f"t-{run_id}", "pod1", "ctr0")
    later = gateway.read_log(f"t-{run_id}", "pod1", "ctr0", since=lines[1].timestamp)
    last = lines[-1].timestamp
    at_last = gateway.read_log(f"t-{run_id}", "pod1", "ctr0", since=last)
    after_last = last + timedelta(microseconds=1)
    nothing_new = gateway.read_log(f"t-{run_id}", "pod1", "ctr0", since=after_last)

    assert "Test PASSED" in [line.text for line in lines]
    assert later == [line for line in lines if line.timestamp >= lines[1].timestamp]
    assert at_last == [line for line in lines if line.timestamp == last]
    assert nothing_new == []


def test_it_follows_a_log_to_its_end_and_ends_an_ended_stream_quietly(
    gateway: ClusterGateway, run_id: str
) -> None:
    apply_namespace_claim_and_pod(gateway, run_id)
    wait_for(lambda: gateway.list_pods(selector(run_id)), lambda ps: ps[0].phase == "Succeeded")
    ends: list[Callable[[], None]] = []

    followed = list(gateway.follow_log(f"t-{run_id}", "pod1", "ctr0", on_open=ends.append))

    assert followed == gateway.read_log(f"t-{run_id}", "pod1", "ctr0")
    ends[0]()  # the follower may stop a stream its container already ended


def test_it_bounds_the_log_it_reads(gateway: ClusterGateway, run_id: str) -> None:
    apply_namespace_claim_and_pod(gateway, run_id)
    wait_for(lambda: gateway.list_pods(selector(run_id)), lambda ps: ps[0].phase == "Succeeded")

    full = gateway.read_log(f"t-{run_id}", "pod1", "ctr1")
    head = gateway.read_log(f"t-{run_id}", "pod1", "ctr1", limit_bytes=400)

    assert 0 < len(head) < len(full)
    assert head == full[: len(head)]


def test_it_reads_no_log_before_the_container_starts(gateway: ClusterGateway, run_id: str) -> None:
    apply_namespace_claim_and_pod(gateway, run_id, selector=NO_SUCH_GPU)

    pods = gateway.list_pods(selector(run_id))

    assert gateway.read_log(f"t-{run_id}", "pod1", "ctr0") == []
    assert pods[0].phase == "Pending"


def test_it_says_why_a_pod_cannot_be_scheduled(gateway: ClusterGateway, run_id: str) -> None:
    apply_namespace_claim_and_pod(gateway, run_id, selector=NO_SUCH_GPU)

    pods = wait_for(lambda: gateway.list_pods(selector(run_id)), lambda ps: bool(ps[0].reason))

    assert pods[0].phase == "Pending"
    assert pods[0].reason == "Unschedulable"
    assert "cannot allocate all claims" in pods[0].message
    assert gateway.list_claims(selector(run_id))[0].allocated is False


def test_it_reports_the_clusters_words_for_an_invalid_claim(
    gateway: ClusterGateway, run_id: str
) -> None:
    gateway.apply(manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id)))

    with pytest.raises(PermanentKubeError) as caught:
        apply_claim(gateway, run_id, "bad-claim", selector="device.attributes[")

    assert caught.value.status == 422
    assert caught.value.reason == "Invalid"
    message = caught.value.message
    assert message.startswith('ResourceClaim.resource.k8s.io "bad-claim" is invalid: spec.devices')
    assert "selectors[0].cel.expression: Invalid value" in message


def test_it_refuses_a_claim_version_the_cluster_does_not_serve(
    kubesim_v1beta1_cluster: Any, run_id: str
) -> None:
    claim = manifests.resource_claim_manifest(
        api_version="v1", namespace="default", name="c", device_class=GPU_CLASS, count=1, labels={}
    )
    gw = ClusterGateway(kubeconfig_path=kubesim_v1beta1_cluster.kubeconfig)

    with pytest.raises(PermanentKubeError) as caught:
        gw.apply(claim)

    assert caught.value.status == 404


def test_it_treats_an_injected_503_as_transient(cluster: Any, gateway: ClusterGateway) -> None:
    gateway.discover()
    cluster.admin(
        "POST",
        "/_kubesim/faults",
        json={"path": "resourceclaims", "error_rate": 1.0, "error_codes": [503]},
    )
    try:
        with pytest.raises(TransientKubeError, match="503"):
            gateway.list_claims("app.kubernetes.io/managed-by=gpu-portal")
    finally:
        cluster.admin("DELETE", "/_kubesim/faults")


@pytest.mark.parametrize("code", [429, 500, 504])
def test_it_treats_overload_and_server_errors_as_transient(kubesim_private: Any, code: int) -> None:
    kubesim_private.admin(
        "POST",
        "/_kubesim/faults",
        json={"path": "/pods$", "error_rate": 1.0, "error_codes": [code]},
    )
    gw = ClusterGateway(kubeconfig_path=kubesim_private.kubeconfig)

    with pytest.raises(TransientKubeError, match=str(code)):
        gw.list_pods("app.kubernetes.io/managed-by=gpu-portal")


def test_it_gives_up_on_a_slow_cluster_after_its_timeout(kubesim_private: Any) -> None:
    kubesim_private.admin("POST", "/_kubesim/faults", json={"path": "/pods$", "latency_ms": 3000})
    gw = ClusterGateway(kubeconfig_path=kubesim_private.kubeconfig, timeout=(1.0, 0.5))

    started = time.monotonic()
    with pytest.raises(TransientKubeError, match="timed out"):
        gw.list_pods("app.kubernetes.io/managed-by=gpu-portal")

    assert time.monotonic() - started < 2


def test_it_treats_a_stopped_cluster_as_transient(tmp_path: Path) -> None:
    handle = kubesim.start(speed=20, kubeconfig=str(tmp_path / "kubeconfig"))
    assert ClusterGateway(kubeconfig_path=handle.kubeconfig).discover().server_version
    handle.stop()
    gw = ClusterGateway(kubeconfig_path=handle.kubeconfig)

    started = time.monotonic()
    with pytest.raises(TransientKubeError):
        gw.list_pods("app.kubernetes.io/managed-by=gpu-portal")

    assert time.monotonic() - started < 5


def test_it_reports_a_missing_kubeconfig_as_permanent(tmp_path: Path) -> None:
    with pytest.raises(PermanentKubeError, match="cannot load the cluster connection"):
        ClusterGateway(kubeconfig_path=str(tmp_path / "missing"))


def test_it_lists_claims_in_one_call_however_many_there_are(
    cluster: Any, gateway: ClusterGateway, run_id: str
) -> None:
    gateway.apply(manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id)))
    calls = []
    for count in (1, 6):
        for index in range(count):
            apply_claim(gateway, run_id, f"claim-{index}")
        cluster.admin("POST", "/_kubesim/counters/reset")
        assert len(gateway.list_claims(selector(run_id))) == count
        requests = cluster.admin("GET", "/_kubesim/counters")["requests"]
        calls.append({k: v for k, v in requests.items() if k.endswith("resourceclaims")})

    assert calls == [{"list resourceclaims": 1}, {"list resourceclaims": 1}]


def test_it_deletes_and_treats_missing_as_done(gateway: ClusterGateway, run_id: str) -> None:
    gateway.apply(manifests.namespace_manifest(name=f"t-{run_id}", labels=labels(run_id)))
    claim = apply_claim(gateway, run_id, "gpu-claim")

    gateway.delete(claim["apiVersion"], "ResourceClaim", f"t-{run_id}", "gpu-claim")
    gateway.delete(claim["apiVersion"], "ResourceClaim", f"t-{run_id}", "gpu-claim")

    assert gateway.list_claims(selector(run_id)) == []


def test_it_passes_the_seeds_preflight_checks(gateway: ClusterGateway) -> None:
    checks = gateway.preflight()

    assert [c.name for c in checks if not c.ok] == []
    assert len(checks) == 6


def test_it_fails_preflight_on_a_cluster_older_than_1_33() -> None:
    handle = kubesim.start(speed=20, served_versions=("v1beta1",), k8s_version="1.32.3")
    try:
        checks = ClusterGateway(kubeconfig_path=handle.kubeconfig).preflight()
    finally:
        handle.stop()

    failed = [c for c in checks if not c.ok]
    assert [c.name for c in failed] == ["Kubernetes version"]
    assert failed[0].detail == "v1.32.3 (needs 1.33 or newer)"


def test_it_fails_preflight_when_the_scheduler_cannot_read_the_served_dra_versions() -> None:
    handle = kubesim.start(speed=20, served_versions=("v1beta1", "v1beta2"), k8s_version="1.34.1")
    try:
        checks = ClusterGateway(kubeconfig_path=handle.kubeconfig).preflight()
    finally:
        handle.stop()

    failed = [c for c in checks if not c.ok]
    assert [c.name for c in failed] == ["DRA version the scheduler uses"]
    assert "use resource.k8s.io/v1, which the cluster does not serve" in failed[0].detail
