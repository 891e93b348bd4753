"""On a shared cluster the portal changes or deletes only what it made (kubesim, no mocks)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User

from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.worker import cluster_steps
from tests.claims.worker.test_cluster_ops import approved_claim
from tests.fixtures.portal import pods_in, wait_until

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "operator"},
    "spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/k8s/cuda-sample:devicequery"}]},
}


def someone_elses_namespace(handle: Any) -> dict:
    """A namespace another team made with kubectl, with a Pod running in it."""
    name = f"team-b-{uuid.uuid4().hex[:6]}"
    created = handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    handle.admin("POST", f"/api/v1/namespaces/{name}/pods", POD)
    return created


def namespace_uid(handle: Any, name: str) -> str:
    return handle.admin("GET", f"/api/v1/namespaces/{name}")["metadata"]["uid"]


def approved_namespace(user: User, cluster: Cluster, name: str) -> NamespaceRequest:
    ns = services.namespace_request_submit(user=user, cluster=cluster, name=name)
    transition(ns, to="approved", allowed=("pending",))
    return ns


def test_it_refuses_a_namespace_that_exists_and_deleting_the_request_leaves_it(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    theirs = someone_elses_namespace(kubesim_cluster)
    name = theirs["metadata"]["name"]
    ns = approved_namespace(alice, cluster, name)
    assert cluster_steps.apply_namespace(ns) is False
    ns.refresh_from_db()
    assert ns.state == "failed"
    assert f"namespace {name} already exists and is not managed by this portal" in (
        ns.state_message
    )
    after = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{name}")
    assert after["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") is None
    services.namespace_request_delete(user=alice, namespace_request=ns)
    cluster_steps.delete_namespace(NamespaceRequest.objects.get(pk=ns.pk))
    assert namespace_uid(kubesim_cluster, name) == theirs["metadata"]["uid"]
    assert pods_in(kubesim_cluster, name) == ["operator"]


def test_it_refuses_a_claim_someone_else_made_and_releasing_leaves_theirs(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    first = approved_claim(alice, cluster)
    cluster_steps.apply_claim(first)  # the portal's namespace, active
    ns = first.namespace_request
    theirs = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared"},
        "spec": {
            "devices": {
                "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns.name}/resourceclaims"
    uid = kubesim_cluster.admin("POST", path, theirs)["metadata"]["uid"]
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="shared", device_class="gpu.nvidia.com"
    )
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "failed"
    assert "ResourceClaim shared in namespace" in claim.state_message
    assert "not managed by this portal" in claim.state_message
    services.claim_request_release(user=alice, claim_request=claim)
    cluster_steps.delete_claim(ClaimRequest.objects.get(pk=claim.pk))
    assert kubesim_cluster.admin("GET", f"{path}/shared")["metadata"]["uid"] == uid


def test_it_deletes_by_uid_so_a_namesake_made_since_survives(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/train"
    # Someone deletes ours and makes their own "train", labels copied and all.
    ours = kubesim_cluster.admin("GET", path)
    kubesim_cluster.admin("DELETE", path)
    copy = {k: ours[k] for k in ("apiVersion", "kind", "spec")}
    copy["metadata"] = {"name": "train", "labels": ours["metadata"]["labels"]}
    new_uid = kubesim_cluster.admin("POST", path.rsplit("/", 1)[0], copy)["metadata"]["uid"]
    services.claim_request_release(user=alice, claim_request=claim)
    cluster_steps.delete_claim(ClaimRequest.objects.get(pk=claim.pk))
    assert kubesim_cluster.admin("GET", path)["metadata"]["uid"] == new_uid


def test_it_gives_claims_sharing_40_characters_their_own_pods(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    first = approved_claim(alice, cluster)
    cluster_steps.apply_claim(first)
    ns = first.namespace_request
    runs = []
    for suffix in ("-training", "-inference"):
        claim = services.claim_request_submit(
            user=alice, namespace_request=ns, name="a" * 40 + suffix, device_class="gpu.nvidia.com"
        )
        transition(claim, to="approved", allowed=("pending",))
        cluster_steps.apply_claim(claim)
        claim.refresh_from_db()
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        run.refresh_from_db()
        assert run.state == "pending", run.state_message
        runs.append(run)
    assert runs[0].pod_name != runs[1].pod_name
    assert sorted(pods_in(kubesim_cluster, ns.name)) == sorted(r.pod_name for r in runs)


def test_a_late_apply_does_not_bring_back_a_deleted_namespace(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    name = f"late-{uuid.uuid4().hex[:6]}"
    ns = approved_namespace(alice, cluster, name)
    stale = NamespaceRequest.objects.get(pk=ns.pk)  # a task that loaded it, then stalled
    services.namespace_request_delete(user=alice, namespace_request=ns)
    cluster_steps.delete_namespace(NamespaceRequest.objects.get(pk=ns.pk))
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleted"
    assert cluster_steps.apply_namespace(stale) is False

    def names() -> list[str]:
        listed = kubesim_cluster.admin("GET", "/api/v1/namespaces")["items"]
        return [n["metadata"]["name"] for n in listed]

    # What the late apply made it deleted again; the cluster removes it in its own time.
    wait_until(lambda: name not in names(), timeout=30)


def test_it_refuses_system_namespace_names_at_submit(alice: User, cluster: Cluster) -> None:
    from django.core.exceptions import ValidationError

    for name in ("kube-system", "gpu-operator", "nvidia-dra-driver", "cert-manager", "default"):
        with pytest.raises(ValidationError) as refused:
            services.namespace_request_submit(user=alice, cluster=cluster, name=name)
        assert "belongs to the cluster itself" in str(refused.value)
