"""Each step against kubesim: idempotent, and careful not to leave objects behind."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connections

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.domain.transitions import transition
from claims.kube.gateway import TransientKubeError
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.read import planned
from claims.worker import cluster_steps, sync
from tests.fixtures.kubesim import raw_request
from tests.fixtures.portal import pods_in, register_cluster, wait_until


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
        cluster_steps.delete_claim(claim)
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
    cluster_steps.apply_claim(claim)
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "waiting"
    assert claim.namespace_request.state == "active"
    assert claims_in(kubesim_cluster, claim.namespace) == ["train"]
    assert claim.kube_uid
    # What the pages show before approval is what was sent.
    assert planned.planned_claim_manifest(claim) == claim.applied_manifest


def test_it_creates_nothing_for_a_claim_released_meanwhile(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    stale = ClaimRequest.objects.get(pk=claim.pk)
    services.claim_request_release(user=alice, claim_request=claim)
    cluster_steps.apply_claim(stale)
    assert claims_in(kubesim_cluster, claim.namespace) == []
    assert ClaimRequest.objects.get(pk=claim.pk).state == "released"


def test_it_speaks_the_seeds_v1beta1(
    alice: User, v1beta1_cluster: Cluster, kubesim_v1beta1_cluster: Any
) -> None:
    claim = approved_claim(alice, v1beta1_cluster)
    cluster_steps.apply_claim(claim)
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
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
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
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    cluster_steps.delete_run_pod(run)
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]  # still going
    services.verification_run_cancel(user=alice, run=run)
    cluster_steps.delete_run_pod(run)
    cluster_steps.delete_run_pod(run)  # the Pod is gone: 404 is done
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
        cluster_steps.apply_claim(claim)
        claim.refresh_from_db()
        assert claim.applied_api_version == "resource.k8s.io/v1beta1"
    finally:
        before.stop()
    after = kubesim.start(served_versions=("v1",), state=state, kubeconfig=kubeconfig, port=port)
    try:
        services.claim_request_release(user=alice, claim_request=claim)
        released = ClaimRequest.objects.get(pk=claim.pk)
        # The worker's gateway picks up the rewritten kubeconfig (new CA) within a second.
        wait_until(lambda: finished(lambda: cluster_steps.delete_claim(released)))
        assert claims_in(after, claim.namespace) == []
    finally:
        gateways.forget_gateways()
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
    cluster_steps.start_run(run)  # the run's own task, before the claim is applied: it waits
    run.refresh_from_db()
    assert run.state == "queued"
    assert pods_in(kubesim_cluster, claim.namespace) == []

    cluster_steps.apply_claim(claim)
    run.refresh_from_db()
    assert run.state == "pending"
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]


def test_it_leaves_a_run_being_created_to_the_worker_creating_it(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_steps.apply_claim(claim)
    run = services.verification_run_start(user=alice, claim_request=claim)
    transition(run, to="creating", allowed=("queued",))  # another worker took it just now

    cluster_steps.start_run(VerificationRun.objects.get(pk=run.pk))
    assert pods_in(kubesim_cluster, claim.namespace) == []
    cluster_steps.start_run(VerificationRun.objects.get(pk=run.pk), resume=True)
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]


@pytest.mark.django_db(transaction=True)
def test_a_namespace_applied_by_two_tasks_at_once_is_written_once(
    alice: User, kubesim_private: kubesim.Handle
) -> None:
    """The namespace's task and the task of a claim asked for right after it both apply it:
    the second waits for the first and finds it active (no second POST, no PATCH)."""
    cluster = register_cluster(kubesim_private, name="once")
    ns = approved_claim(alice, cluster).namespace_request
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    # A little latency on the namespace's create, so the two overlap.
    fault = {"path": "/api/v1/namespaces$", "latency_ms": 300}
    kubesim_private.admin("POST", "/_kubesim/faults", fault)
    applied: list[bool] = []

    def apply() -> None:
        applied.append(cluster_steps.apply_namespace(NamespaceRequest.objects.get(pk=ns.pk)))
        connections.close_all()

    threads = [threading.Thread(target=apply) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        kubesim_private.admin("DELETE", "/_kubesim/faults")
        gateways.forget_gateways()
    assert applied == [True, True]
    writes = kubesim_private.admin("GET", "/_kubesim/counters")["requests"]
    assert (writes.get("create namespaces"), writes.get("patch namespaces")) == (1, None)


def test_deleting_a_request_whose_namespace_was_someone_elses_says_it_was_left(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    """Issue 23.7: the namespace is rightly untouched; the message must not say it went."""
    name = f"theirs-{uuid.uuid4().hex[:6]}"
    body = {"metadata": {"name": name, "labels": {"team": "b"}}}
    kubesim_cluster.admin("POST", "/api/v1/namespaces", body)
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name=name)
    transition(ns, to="approved", allowed=("pending",))
    assert not cluster_steps.apply_namespace(ns)
    ns = services.namespace_request_delete(
        user=alice, namespace_request=NamespaceRequest.objects.get(pk=ns.pk)
    )
    cluster_steps.delete_namespace(NamespaceRequest.objects.get(pk=ns.pk))
    ns.refresh_from_db()
    assert ns.state == "deleted"
    assert ns.state_message == (
        f"Request deleted; namespace {name} is not the portal's and was left as it was."
    )
    assert kubesim_cluster.admin("GET", f"/api/v1/namespaces/{name}")["metadata"]["labels"] == {
        "team": "b",
        "kubernetes.io/metadata.name": name,
    }


def test_the_portals_namespaces_enforce_the_pod_security_an_admin_sets(
    alice: User, cluster: Cluster, kubesim_cluster: Any, settings: Any
) -> None:
    """Issue 23.8: the level is on the namespace, so kubesim (as a real cluster) refuses a
    Pod that breaks it there, the user's own included; the portal's verification Pod passes."""
    claim = approved_claim(alice, cluster)
    cluster_steps.apply_claim(claim)
    ns = claim.namespace
    labels = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{ns}")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    plain = {"metadata": {"name": "mine"}, "spec": {"containers": [{"name": "a", "image": "x"}]}}
    refused = raw_request(kubesim_cluster, "POST", f"/api/v1/namespaces/{ns}/pods", plain)
    assert refused.status == 403
    assert 'violates PodSecurity "restricted:latest"' in refused.json()["message"]
    run = services.verification_run_start(
        user=alice, claim_request=ClaimRequest.objects.get(pk=claim.pk)
    )
    cluster_steps.start_run(run)
    assert pods_in(kubesim_cluster, ns) == [run.pod_name]

    settings.NAMESPACE_POD_SECURITY = ""  # the cluster's default: no label
    other = approved_claim(alice, cluster)
    cluster_steps.apply_claim(other)
    labels = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{other.namespace}")["metadata"]
    assert not any(key.startswith("pod-security") for key in labels["labels"])
