"""Desired versus observed: what changes behind the portal's back is healed or reported."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from claims.domain import access, services
from claims.domain.transitions import transition
from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest
from claims.worker import cluster_steps, reconciler, sync
from tests.claims.worker.test_cluster_ops import approved_claim, claims_in
from tests.fixtures.kubesim import raw_request, wait_until

A_MINUTE_AGO = timedelta(minutes=1)


def applied(user: User, cluster: Cluster) -> ClaimRequest:
    """An active namespace with a waiting claim in it, both settled for a minute."""
    claim = approved_claim(user, cluster)
    cluster_steps.apply_claim(claim)
    past = timezone.now() - A_MINUTE_AGO
    NamespaceRequest.objects.filter(pk=claim.namespace_request_id).update(updated=past)
    ClaimRequest.objects.filter(pk=claim.pk).update(updated=past, applied_at=past)
    return ClaimRequest.objects.select_related("namespace_request").get(pk=claim.pk)


def ns_path(claim: ClaimRequest) -> str:
    return f"/api/v1/namespaces/{claim.namespace}"


def uid_in(handle: Any, path: str) -> str:
    return handle.admin("GET", path)["metadata"]["uid"]


def delete_namespace_outside(handle: Any, claim: ClaimRequest) -> None:
    """kubectl delete namespace, and wait: the namespace controller empties it first."""
    handle.admin("DELETE", ns_path(claim))
    wait_until(lambda: raw_request(handle, "GET", ns_path(claim)).status == 404, timeout=15)


def test_it_recreates_a_namespace_deleted_outside_the_portal_with_its_claims(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    old_uid = claim.namespace_request.kube_uid
    delete_namespace_outside(kubesim_cluster, claim)
    reconciler.look_at_cluster(cluster)
    ns = NamespaceRequest.objects.get(pk=claim.namespace_request_id)
    assert ns.state == "approved"
    assert "deleted outside the portal" in ns.state_message
    assert ClaimRequest.objects.get(pk=claim.pk).state == "approved"
    cluster_steps.apply_claim(ClaimRequest.objects.get(pk=claim.pk))
    ns.refresh_from_db()
    assert ns.state == "active"
    assert ns.kube_uid == uid_in(kubesim_cluster, ns_path(claim)) != old_uid
    assert ClaimRequest.objects.get(pk=claim.pk).state == "waiting"
    assert claims_in(kubesim_cluster, claim.namespace) == ["train"]


def test_a_claim_into_a_namespace_deleted_outside_heals_the_namespace_first(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    delete_namespace_outside(kubesim_cluster, claim)
    second = services.claim_request_submit(
        user=alice,
        namespace_request=claim.namespace_request,
        name="second",
        device_class="gpu.nvidia.com",
    )
    transition(second, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(second)  # 404 for the namespace: not "failed" for ever
    assert NamespaceRequest.objects.get(pk=claim.namespace_request_id).state == "approved"
    for pk in (claim.pk, second.pk):
        cluster_steps.apply_claim(ClaimRequest.objects.get(pk=pk))
        assert ClaimRequest.objects.get(pk=pk).state == "waiting"
    assert sorted(claims_in(kubesim_cluster, claim.namespace)) == ["second", "train"]


def test_it_puts_back_labels_changed_outside_the_portal(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    unlabel = {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
    patch = raw_request(
        kubesim_cluster,
        "PATCH",
        ns_path(claim),
        unlabel,
        content_type="application/merge-patch+json",
    )
    assert patch.status == 200
    reconciler.look_at_cluster(cluster)
    labels = kubesim_cluster.admin("GET", ns_path(claim))["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    ns = NamespaceRequest.objects.get(pk=claim.namespace_request_id)
    assert ns.state == "active"
    assert AuditEvent.objects.filter(
        object_id=ns.pk, object_kind="namespace_request", message__contains="restored"
    ).exists()


def test_it_reports_a_namespace_replaced_by_someone_else_and_touches_nothing(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    delete_namespace_outside(kubesim_cluster, claim)
    theirs = {"metadata": {"name": claim.namespace, "labels": {"team": "b"}}}
    their_uid = kubesim_cluster.admin("POST", "/api/v1/namespaces", theirs)["metadata"]["uid"]
    reconciler.look_at_cluster(cluster)
    ns = NamespaceRequest.objects.get(pk=claim.namespace_request_id)
    assert ns.state == "failed"
    assert "replaced outside the portal" in ns.state_message
    assert ClaimRequest.objects.get(pk=claim.pk).state == "failed"
    found = kubesim_cluster.admin("GET", ns_path(claim))
    assert found["metadata"]["uid"] == their_uid
    assert found["metadata"]["labels"] == {
        "team": "b",
        "kubernetes.io/metadata.name": claim.namespace,
    }


def test_it_reapplies_a_claim_deleted_outside_the_portal(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/train"
    kubesim_cluster.admin("DELETE", path)
    sync.sync_cluster(cluster)
    claim.refresh_from_db()
    assert claim.state == "approved"
    assert "deleted outside the portal" in claim.state_message
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "waiting"
    assert claim.kube_uid == uid_in(kubesim_cluster, path)


def test_it_leaves_a_row_with_a_retry_scheduled_to_that_retry(
    alice: User, cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"retry-{uuid.uuid4().hex[:6]}"
    )
    transition(ns, to="approved", allowed=("pending",))
    an_hour_ago = timezone.now() - timedelta(hours=1)
    soon = timezone.now() + A_MINUTE_AGO
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=an_hour_ago, next_attempt_at=soon)
    assert reconciler.reconcile(stale_seconds=30) == 0
    NamespaceRequest.objects.filter(pk=ns.pk).update(next_attempt_at=an_hour_ago)
    assert reconciler.reconcile(stale_seconds=30) == 1
    # The message is on its way: the next round does not send a second one.
    assert reconciler.reconcile(stale_seconds=30) == 0


def test_it_grants_access_again_when_its_rolebinding_is_removed_outside(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    ns = claim.namespace_request
    access.grant_access(ns)
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=timezone.now() - A_MINUTE_AGO)
    binding = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns.name}/rolebindings"
    kubesim_cluster.admin("DELETE", f"{binding}/gpu-portal-alice")
    reconciler.look_at_cluster(cluster)
    ns.refresh_from_db()
    assert ns.access_granted_at is None
    assert AuditEvent.objects.filter(
        object_id=ns.pk, message__contains="RoleBinding of namespace"
    ).exists()
    access.grant_access(ns)
    subjects = kubesim_cluster.admin("GET", f"{binding}/gpu-portal-alice")["subjects"]
    assert {"kind": "ServiceAccount", "name": "gpu-portal-alice", "namespace": ns.name} in subjects


def test_it_relabels_a_claim_whose_labels_were_removed_and_does_not_call_it_deleted(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = applied(alice, cluster)
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/train"
    uid = uid_in(kubesim_cluster, path)
    unlabel = {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
    patch = raw_request(
        kubesim_cluster, "PATCH", path, unlabel, content_type="application/merge-patch+json"
    )
    assert patch.status == 200
    sync.sync_cluster(cluster)
    claim.refresh_from_db()
    if claim.state == "approved":  # healed by the worker's apply
        cluster_steps.apply_claim(claim)
        claim.refresh_from_db()
    assert claim.state == "waiting"
    found = kubesim_cluster.admin("GET", path)["metadata"]
    assert found["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert found["uid"] == uid == claim.kube_uid
    messages = AuditEvent.objects.filter(object_kind="claim_request", object_id=claim.pk)
    assert not [e.message for e in messages if "deleted" in e.message]
