"""Each namespace the portal creates carries a ResourceQuota from its team's quotas, so users
of the namespace who go round the portal (kubectl, the API) cannot go over it either."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from django.contrib.auth.models import User

from claims.clusters import gateways
from claims.domain import teams
from claims.domain.transitions import transition
from claims.kube import manifests
from claims.kube.errors import PermanentKubeError
from claims.models import Cluster, NamespaceRequest, Team, TeamQuota
from claims.worker import cluster_steps

GPU = "gpu.nvidia.com"
KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


@pytest.fixture
def team(alice: User, cluster: Cluster) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=GPU, max_devices=3)
    return team


@pytest.fixture
def ns(team: Team, alice: User, cluster: Cluster, namespace_name: str) -> NamespaceRequest:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name=namespace_name)
    transition(ns, to="approved", allowed=("pending",))
    assert cluster_steps.apply_namespace(ns)
    return ns


def resource_quota(handle: Any, namespace: str) -> dict:
    return handle.admin("GET", f"/api/v1/namespaces/{namespace}/resourcequotas/gpu-portal-quota")


def claim_as_a_kubectl_user(cluster: Cluster, namespace: str, name: str, count: int) -> dict:
    manifest = manifests.resource_claim_manifest(
        api_version="v1", namespace=namespace, name=name, device_class=GPU, count=count, labels={}
    )
    return gateways.gateway_for(cluster).create(manifest)


@pytest.mark.parametrize("k8s", ["1.33", "1.34"])  # resource.k8s.io v1beta1 and v1 platforms
def test_it_builds_a_valid_resource_quota(k8s: str) -> None:
    manifest = manifests.resource_quota_manifest(
        namespace="team-a", hard={KEY: "4"}, labels={"gpu-portal.io/namespace-request": "7"}
    )
    kubernetes_validate.validate(manifest, k8s, strict=True)
    assert manifest["metadata"]["name"] == "gpu-portal-quota"
    assert manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert manifest["spec"] == {"hard": {KEY: "4"}}


def test_it_puts_the_teams_quota_on_the_namespace_with_its_labels(
    ns: NamespaceRequest, kubesim_cluster: Any
) -> None:
    found = resource_quota(kubesim_cluster, ns.name)
    assert found["spec"]["hard"] == {KEY: "3"}
    assert found["metadata"]["labels"] == ns.labels() | manifests.MANAGED_BY_LABELS
    assert found["status"] == {"hard": {KEY: "3"}, "used": {KEY: "0"}}


def test_a_kubectl_user_of_the_namespace_cannot_go_over_it(
    ns: NamespaceRequest, cluster: Cluster
) -> None:
    claim_as_a_kubectl_user(cluster, ns.name, "mine", 2)
    with pytest.raises(PermanentKubeError) as refused:
        claim_as_a_kubectl_user(cluster, ns.name, "more", 2)
    assert refused.value.status == 403
    assert refused.value.message == (
        'resourceclaims.resource.k8s.io "more" is forbidden: exceeded quota: gpu-portal-quota, '
        f"requested: {KEY}=2, used: {KEY}=2, limited: {KEY}=3"
    )


def test_it_follows_the_quota_when_the_admin_changes_it(
    ns: NamespaceRequest,
    team: Team,
    cluster: Cluster,
    kubesim_cluster: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    transition(ns, to="active", allowed=("approved", "active"))
    TeamQuota.objects.filter(team=team).update(max_devices=5)
    with django_capture_on_commit_callbacks() as callbacks:
        teams.team_quotas_changed(team=team)
    assert len(callbacks) == 1  # apply_namespace_quota for the one active namespace
    cluster_steps.apply_namespace_quota(ns)
    assert resource_quota(kubesim_cluster, ns.name)["spec"]["hard"] == {KEY: "5"}
    claim_as_a_kubectl_user(cluster, ns.name, "five", 5)
    TeamQuota.objects.filter(team=team).update(max_devices=None)
    cluster_steps.apply_namespace_quota(ns)
    with pytest.raises(Exception, match="404"):
        resource_quota(kubesim_cluster, ns.name)


def test_a_namespace_of_a_user_in_no_team_gets_no_quota(
    carol: User, cluster: Cluster, namespace_name: str, kubesim_cluster: Any
) -> None:
    ns = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name=namespace_name)
    transition(ns, to="approved", allowed=("pending",))
    assert cluster_steps.apply_namespace(ns)
    items = kubesim_cluster.admin("GET", f"/api/v1/namespaces/{ns.name}/resourcequotas")["items"]
    assert items == []
