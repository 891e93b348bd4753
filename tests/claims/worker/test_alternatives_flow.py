"""A claim with alternatives on kubesim: the H100s are all taken, so the scheduler takes the
claim's second choice, and the claim and run pages say which one the cluster took."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from claims.clusters import gateways
from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, VerificationRun
from claims.worker import cluster_steps, sync
from kubesim.cluster.workloads import Workload
from tests.fixtures.kubesim import wait_until
from tests.fixtures.portal import allocation_in, register_cluster

GPU = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


@pytest.fixture
def private_cluster(db: None, kubesim_private: Any) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="busy")
    gateways.forget_gateways()


def fill_node(handle: Any, node: str, gpus: int) -> None:
    """Another team takes every GPU of the node, through the API as kubectl would."""
    workload = Workload(namespace="other-team", name="all-h100", gpus=gpus, node=node)
    for path, obj in workload.manifests("v1"):
        handle.admin("POST", path, obj)
    claim_path = "/apis/resource.k8s.io/v1/namespaces/other-team/resourceclaims/all-h100"
    wait_until(lambda: handle.admin("GET", claim_path).get("status", {}).get("allocation"), 15)


def h100_else_a100(user: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"alt-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=user,
        namespace_request=ns,
        name="train",
        device_class=GPU,
        gpu_model=H100,
        alternatives=[{"device_class": GPU, "gpu_model": A100, "count": 1}],
    )
    transition(ns, to="approved", allowed=("pending",))
    transition(claim, to="approved", allowed=("pending",))
    return claim


def own_pod_uses(handle: Any, claim: ClaimRequest) -> None:
    """alice's own Pod that uses the claim and runs until deleted ("Use it in your own Pod")."""
    pod = Workload(namespace=claim.namespace, name=claim.name).pod()
    handle.admin("POST", f"/api/v1/namespaces/{claim.namespace}/pods", pod)


def test_it_gets_the_second_choice_when_the_first_is_all_taken(
    alice: User, private_cluster: Cluster, kubesim_private: Any, client: Client
) -> None:
    fill_node(kubesim_private, "gpu-node-1", 4)
    claim = h100_else_a100(alice, private_cluster)
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    request = claim.applied_manifest["spec"]["devices"]["requests"][0]
    assert [sub["name"] for sub in request["firstAvailable"]] == ["h100", "a100"]

    own_pod_uses(kubesim_private, claim)
    allocation = wait_until(lambda: allocation_in(kubesim_private, claim), timeout=15)
    assert {result["request"] for result in allocation["devices"]["results"]} == {"gpu/a100"}
    wait_until(lambda: sync.sync_cluster(private_cluster) or claim_row(claim).allocation, 15)

    assert claim_row(claim).allocated_alternative == "gpu/a100"
    client.force_login(alice)
    claim_page = client.get(reverse("claim", args=[claim.pk])).content.decode()
    assert "gpu/a100: alternative 2 (NVIDIA A100-SXM4-40GB)" in claim_page
    api = client.get(f"/api/v1/claims/{claim.pk}/").json()
    assert [alt["name"] for alt in api["alternatives"]] == ["h100", "a100"]
    assert api["allocated_alternative"] == "gpu/a100"


def test_the_run_page_says_which_alternative_its_pod_got(
    alice: User, private_cluster: Cluster, kubesim_private: Any, client: Client
) -> None:
    fill_node(kubesim_private, "gpu-node-1", 4)
    claim = h100_else_a100(alice, private_cluster)
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)

    def run_got_devices() -> bool:
        sync.sync_cluster(private_cluster)
        return bool(VerificationRun.objects.get(pk=run.pk).devices)

    wait_until(run_got_devices, timeout=15)
    run.refresh_from_db()
    assert run.allocated_alternative == "gpu/a100"
    client.force_login(alice)
    run_page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "gpu/a100: alternative 2 (NVIDIA A100-SXM4-40GB)" in run_page


def claim_row(claim: ClaimRequest) -> ClaimRequest:
    return ClaimRequest.objects.get(pk=claim.pk)
