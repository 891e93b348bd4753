"""The tasks end to end: a real Celery worker and beat on Redis, kubesim over HTTPS."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User

import kubesim
from claims.domain import services
from claims.models import ClaimRequest, Cluster
from claims.read.selectors import events_for
from tests.fixtures.portal import allocation_in, pods_in, state_of, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_beat_process"),
]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def approved_claim(alice: User, carol: User, cluster: Cluster, **fields: Any) -> ClaimRequest:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name=unique("team"))
    values = {"name": "train", "device_class": "gpu.nvidia.com", "count": 1} | fields
    claim = services.claim_request_submit(user=alice, namespace_request=ns, **values)
    services.claim_request_approve(user=carol, claim_request=claim)
    return claim


def test_it_takes_a_claim_from_approval_to_a_passed_run(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = approved_claim(alice, carol, cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    assert state_of(claim.namespace_request) == "active"
    assert claim.applied_api_version == "resource.k8s.io/v1"
    assert claim.applied_manifest["spec"]["devices"]["requests"][0]["name"] == "gpu"
    assert claim.allocation is None  # DRA allocates only when a Pod uses the claim

    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: state_of(run) in ("succeeded", "failed"), timeout=30)
    assert run.state == "succeeded", run.state_message
    assert run.passed is True
    assert run.device_name.startswith("NVIDIA ")
    assert run.compute_capability and run.memory_mib
    logs = {log.container: log.text for log in run.logs.all()}
    assert "Test PASSED" in logs["ctr0"]
    assert "Result = PASS" in logs["ctr1"]


def test_it_records_which_devices_a_run_got(alice: User, carol: User, cluster: Cluster) -> None:
    # kubesim runs at speed 20 here: the Pod holds its GPU for about 0.25 s.
    claim = approved_claim(alice, carol, cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: state_of(run) == "succeeded", timeout=30)
    [device] = run.devices
    assert device["driver"] == "gpu.nvidia.com"
    assert device["pool"] == run.node
    assert device["attributes"]["productName"] == run.device_name
    # The Pod is done, so DRA gave the GPU back.
    wait_until(lambda: state_of(claim) == "waiting")


def test_it_speaks_v1beta1_to_the_seeds_platform(
    alice: User, carol: User, v1beta1_cluster: Cluster
) -> None:
    claim = approved_claim(alice, carol, v1beta1_cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    assert claim.applied_api_version == "resource.k8s.io/v1beta1"
    assert claim.applied_manifest["spec"]["devices"]["requests"][0]["deviceClassName"]


def test_it_shows_the_clusters_words_when_it_refuses(
    alice: User, carol: User, cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name=unique("team"))
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    # Valid CEL but longer than the API server accepts, saved before the portal checked that.
    too_long = f"device.driver != '{'x' * 10300}'"
    ClaimRequest.objects.filter(pk=claim.pk).update(selector=too_long)
    claim.refresh_from_db()
    services.claim_request_approve(user=carol, claim_request=claim)
    wait_until(lambda: state_of(claim) == "failed")
    assert "may not be more than 10240 bytes" in claim.state_message


def test_it_retries_a_failed_claim(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    fault = {"path": "namespaces/[^/]+/resourceclaims$", "error_codes": [403], "error_rate": 1.0}
    kubesim_cluster.admin("POST", "/_kubesim/faults", json=fault)
    try:
        claim = approved_claim(alice, carol, cluster)
        wait_until(lambda: state_of(claim) == "failed")
        assert "403" in claim.state_message
    finally:
        kubesim_cluster.admin("DELETE", "/_kubesim/faults")
    services.claim_request_retry(user=alice, claim_request=claim)
    wait_until(lambda: state_of(claim) == "waiting")


def test_it_rides_out_a_short_outage(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    fault = {
        "path": "namespaces/[^/]+/resourceclaims$",
        "error_codes": [503],
        "outage_seconds": 1.5,
    }
    kubesim_cluster.admin("POST", "/_kubesim/faults", json=fault)
    try:
        claim = approved_claim(alice, carol, cluster)
        wait_until(lambda: state_of(claim) == "waiting", timeout=20)
    finally:
        kubesim_cluster.admin("DELETE", "/_kubesim/faults")
    assert claim.state_message.startswith("ResourceClaim created")


def test_it_deletes_a_released_claim_from_the_cluster(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, carol, cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    services.claim_request_release(user=alice, claim_request=claim)
    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at is not None)
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims"
    assert kubesim_cluster.admin("GET", path)["items"] == []


def wait_for_syncs(cluster: Cluster, count: int) -> None:
    seen = set()

    def synced_often_enough() -> bool:
        seen.add(Cluster.objects.get(pk=cluster.pk).last_synced_at)
        return len(seen) > count

    wait_until(synced_often_enough, interval=0.02)


def test_it_cancels_a_running_run_and_frees_its_gpu(
    alice: User, carol: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    claim = approved_claim(alice, carol, slow_cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: state_of(claim) == "in_use")  # the Pod is scheduled and holds the GPU
    assert state_of(run) in ("pending", "running")
    assert allocation_in(slow_kubesim, claim)

    services.verification_run_cancel(user=alice, run=run)

    wait_until(lambda: pods_in(slow_kubesim, claim.namespace) == [])
    wait_until(lambda: allocation_in(slow_kubesim, claim) is None)
    wait_until(lambda: state_of(claim) == "waiting")
    assert claim.allocation is None
    wait_for_syncs(slow_cluster, 3)
    run.refresh_from_db()
    assert (run.state, run.state_message) == ("failed", "Cancelled by alice.")
    assert run.passed is None
    changes = [(event.to_state, event.message) for event in events_for(run)]
    assert changes[-1] == ("failed", "Cancelled by alice.")
    assert [state for state, _ in changes].count("failed") == 1


def test_it_leaves_no_pod_behind_when_a_run_is_cancelled_at_once(
    alice: User, carol: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    claim = approved_claim(alice, carol, slow_cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    run = services.verification_run_start(user=alice, claim_request=claim)
    # Whether the worker created the Pod before the cancel or not, none may stay.
    services.verification_run_cancel(user=carol, run=run)
    time.sleep(1)
    wait_until(lambda: pods_in(slow_kubesim, claim.namespace) == [])
    assert state_of(run) == "failed"
    assert state_of(claim) == "waiting"


def test_it_deletes_a_cancelled_runs_pod_after_a_short_outage(
    alice: User, carol: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    claim = approved_claim(alice, carol, slow_cluster)
    wait_until(lambda: state_of(claim) == "waiting")
    run = services.verification_run_start(user=alice, claim_request=claim)
    wait_until(lambda: state_of(claim) == "in_use")
    fault = {"path": f"pods/{run.pod_name}$", "error_codes": [503], "outage_seconds": 1.5}
    slow_kubesim.admin("POST", "/_kubesim/faults", json=fault)
    try:
        services.verification_run_cancel(user=alice, run=run)
        time.sleep(0.5)
        assert pods_in(slow_kubesim, claim.namespace) == [run.pod_name]  # the delete failed
        wait_until(lambda: pods_in(slow_kubesim, claim.namespace) == [])
    finally:
        slow_kubesim.admin("DELETE", "/_kubesim/faults")
    wait_until(lambda: state_of(claim) == "waiting")
    assert state_of(run) == "failed"
