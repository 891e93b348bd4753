"""Deletion takes time on a real cluster (graceful Pods, ordered namespace deletion): the
portal follows it and never reuses a name that is still going (kubesim, no mocks)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

import kubesim
from claims.domain import services
from claims.domain.transitions import transition
from claims.kube.gateway import TransientKubeError
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.worker import cluster_steps
from tests.claims.worker.test_cluster_ops import approved_claim
from tests.fixtures.kubesim import raw_request
from tests.fixtures.portal import wait_until

MERGE_PATCH = "application/merge-patch+json"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def settles(step: Any) -> bool:
    """True once `step` runs without a transient error (the task would retry it)."""
    try:
        step()
    except TransientKubeError:
        return False
    return True


def running_claim(alice: User, cluster: Cluster) -> ClaimRequest:
    """An applied claim whose verification Pod has it reserved."""
    claim = approved_claim(alice, cluster)
    cluster_steps.apply_claim(claim)
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    claim.refresh_from_db()
    return claim


def test_a_namespace_stays_deleting_until_the_cluster_has_removed_it(
    alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    claim = running_claim(alice, cluster)
    ns = claim.namespace_request
    services.namespace_request_delete(user=alice, namespace_request=ns)
    ns = NamespaceRequest.objects.get(pk=ns.pk)
    with pytest.raises(TransientKubeError, match="still terminating"):
        cluster_steps.delete_namespace(ns)  # the namespace controller has not even started
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleting"
    with pytest.raises(ValidationError, match="still being deleted; try again when it is gone"):
        services.namespace_request_submit(user=alice, cluster=cluster, name=ns.name)
    wait_until(lambda: settles(lambda: cluster_steps.delete_namespace(ns)), timeout=60)
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleted"
    names = [
        n["metadata"]["name"] for n in kubesim_cluster.admin("GET", "/api/v1/namespaces")["items"]
    ]
    assert ns.name not in names
    again = services.namespace_request_submit(user=alice, cluster=cluster, name=ns.name)
    assert again.state == "pending"


def test_a_terminating_namespace_of_someone_else_is_refused_with_a_clear_message(
    alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    name = f"team-b-{uuid.uuid4().hex[:6]}"
    kubesim_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]},
            "spec": {"devices": {"requests": [request]}}}  # fmt: skip
    kubesim_cluster.admin("POST", CLAIMS.format(ns=name), held)
    kubesim_cluster.admin("DELETE", f"/api/v1/namespaces/{name}")
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name=name)
    transition(ns, to="approved", allowed=("pending",))
    try:
        assert cluster_steps.apply_namespace(ns) is False
        ns.refresh_from_db()
        assert (ns.state, ns.state_message) == (
            "failed",
            f"namespace {name} is still being deleted; try again when it is gone.",
        )
    finally:
        path, patch = f"{CLAIMS.format(ns=name)}/held", {"metadata": {"finalizers": None}}
        raw_request(kubesim_cluster, "PATCH", path, patch, content_type=MERGE_PATCH)


def test_a_released_claim_is_cleaned_up_once_its_resourceclaim_is_gone_and_its_name_waits(
    alice: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    claim = running_claim(alice, slow_cluster)
    pods = f"/api/v1/namespaces/{claim.namespace}/pods"
    # At speed 1 the sample runs 3 s; stopped, it runs on to its end (it ignores SIGTERM).
    wait_until(lambda: [p["status"].get("phase") for p in slow_kubesim.admin("GET", pods)["items"]]
               == ["Running"], timeout=30)  # fmt: skip
    services.claim_request_release(user=alice, claim_request=claim)
    claim = ClaimRequest.objects.get(pk=claim.pk)
    # The Pod terminates gracefully; the claim's finalizer holds it until the Pod is gone.
    with pytest.raises(TransientKubeError, match="still being deleted"):
        cluster_steps.delete_claim(claim)
    claim.refresh_from_db()
    assert (claim.state, claim.cleaned_up_at) == ("released", None)
    successor = services.claim_request_submit(
        user=alice, namespace_request=claim.namespace_request, name=claim.name,
        device_class="gpu.nvidia.com",
    )  # fmt: skip
    transition(successor, to="approved", allowed=("pending",))
    with pytest.raises(TransientKubeError, match="still being deleted; waiting"):
        cluster_steps.apply_claim(successor)  # waits for its namesake, does not fail
    assert ClaimRequest.objects.get(pk=successor.pk).state == "applying"
    wait_until(lambda: settles(lambda: cluster_steps.delete_claim(claim)), timeout=60)
    assert ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at is not None
    cluster_steps.apply_claim(ClaimRequest.objects.get(pk=successor.pk))
    successor.refresh_from_db()
    assert successor.state == "waiting", successor.state_message
    assert claim_status(slow_kubesim, successor) == {}


def claim_status(handle: kubesim.Handle, claim: ClaimRequest) -> dict:
    path = f"{CLAIMS.format(ns=claim.namespace)}/{claim.name}"
    return handle.admin("GET", path).get("status") or {}
