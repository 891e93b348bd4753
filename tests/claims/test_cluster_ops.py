"""Each step against kubesim: idempotent, and careful not to leave objects behind."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import User

import kubesim
from claims import cluster_ops, services, sync
from claims.kube.gateway import TransientKubeError
from claims.models import ClaimRequest, Cluster, VerificationRun
from claims.transitions import transition
from tests.fixtures.portal import pods_in, wait_until


def approved_claim(user: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"ops-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=user, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    transition(ns, to="approved", allowed=("pending",))
    transition(claim, to="approved", allowed=("pending",))
    return claim


def deleted(claim: ClaimRequest) -> bool:
    try:
        cluster_ops.delete_claim(claim)
    except TransientKubeError:
        return False
    return True


def claims_in(handle: Any, namespace: str) -> list[str]:
    """Claims in the namespace that are not on their way out."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    items = handle.admin("GET", path)["items"]
    return [i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")]


def test_it_applies_namespace_then_claim_and_twice_is_harmless(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_ops.apply_claim(claim)
    cluster_ops.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "waiting"
    assert claim.namespace_request.state == "active"
    assert claims_in(kubesim_cluster, claim.namespace) == ["train"]
    assert claim.kube_uid
    # What the pages show before approval is what was sent.
    assert cluster_ops.planned_claim_manifest(claim) == claim.applied_manifest


def test_it_creates_nothing_for_a_claim_released_meanwhile(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    stale = ClaimRequest.objects.get(pk=claim.pk)
    services.claim_request_release(user=alice, claim_request=claim)
    cluster_ops.apply_claim(stale)
    assert claims_in(kubesim_cluster, claim.namespace) == []
    assert ClaimRequest.objects.get(pk=claim.pk).state == "released"


def test_it_speaks_the_seeds_v1beta1(
    alice: User, v1beta1_cluster: Cluster, kubesim_v1beta1_cluster: Any
) -> None:
    claim = approved_claim(alice, v1beta1_cluster)
    cluster_ops.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.applied_api_version == "resource.k8s.io/v1beta1"
    assert claim.applied_manifest["spec"]["devices"]["requests"][0] == {
        "name": "gpu",
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }


def test_it_deletes_a_released_claim_and_its_pods(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_ops.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_ops.start_run(run)
    services.claim_request_release(user=alice, claim_request=claim)
    # The worker retries while a scheduled Pod's reservation holds the claim (finalizer).
    wait_until(lambda: deleted(claim), timeout=30)
    pods = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{claim.namespace}/pods")["items"]
    assert [p for p in pods if not p["metadata"].get("deletionTimestamp")] == []
    assert claims_in(kubesim_cluster, claim.namespace) == []
    assert ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at is not None


def test_it_deletes_only_the_pod_of_a_cancelled_run_and_twice_is_harmless(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_ops.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_ops.start_run(run)
    cluster_ops.delete_run_pod(run)
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]  # still going
    services.verification_run_cancel(user=alice, run=run)
    cluster_ops.delete_run_pod(run)
    cluster_ops.delete_run_pod(run)  # the Pod is gone: 404 is done
    assert pods_in(kubesim_cluster, claim.namespace) == []
    assert claims_in(kubesim_cluster, claim.namespace) == ["train"]


def test_it_releases_a_v1beta1_claim_after_the_cluster_stops_serving_v1beta1(
    alice: User, tmp_path: Path
) -> None:
    """An upgrade to a release without v1beta1 (1.38): the release still deletes the claim."""
    kubeconfig, state = str(tmp_path / "kubeconfig"), str(tmp_path / "state.json")
    before = kubesim.start(served_versions=("v1beta1",), state=state, kubeconfig=kubeconfig)
    port = urlsplit(before.url).port or 0
    cluster = Cluster.objects.create(name="upgraded", kubeconfig_path=kubeconfig)
    try:
        sync.refresh_inventory(cluster)
        claim = approved_claim(alice, cluster)
        cluster_ops.apply_claim(claim)
        claim.refresh_from_db()
        assert claim.applied_api_version == "resource.k8s.io/v1beta1"
    finally:
        before.stop()
    after = kubesim.start(served_versions=("v1",), state=state, kubeconfig=kubeconfig, port=port)
    try:
        services.claim_request_release(user=alice, claim_request=claim)
        released = ClaimRequest.objects.get(pk=claim.pk)
        # The worker's gateway picks up the rewritten kubeconfig (new CA) within a second.
        wait_until(lambda: finished(lambda: cluster_ops.delete_claim(released)))
        assert claims_in(after, claim.namespace) == []
    finally:
        cluster_ops.forget_gateways()
        after.stop()


def finished(step: Any) -> bool:
    try:
        step()
    except TransientKubeError:
        return False
    return True


def test_it_starts_a_run_queued_on_the_claim_when_it_applies_the_claim(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_ops.start_run(run)  # the run's own task, before the claim is applied: it waits
    run.refresh_from_db()
    assert run.state == "queued"
    assert pods_in(kubesim_cluster, claim.namespace) == []

    cluster_ops.apply_claim(claim)
    run.refresh_from_db()
    assert run.state == "pending"
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]


def test_it_leaves_a_run_being_created_to_the_worker_creating_it(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_ops.apply_claim(claim)
    run = services.verification_run_start(user=alice, claim_request=claim)
    transition(run, to="creating", allowed=("queued",))  # another worker took it just now

    cluster_ops.start_run(VerificationRun.objects.get(pk=run.pk))
    assert pods_in(kubesim_cluster, claim.namespace) == []
    cluster_ops.start_run(VerificationRun.objects.get(pk=run.pk), resume=True)
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]
