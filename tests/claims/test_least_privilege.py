"""The whole flow works with exactly docs/portal-clusterrole.yaml, on a kubesim that enforces
RBAC as the API server does: the documented role is the one the portal needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

import kubesim
from claims import access, cluster_ops, reconciler, services, sync
from claims.kube.gateway import TransientKubeError
from claims.kube.informer import Informer
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    VerificationRun,
    managed_selector,
)
from tests.fixtures.kubesim import wait_until

ROLE = Path(__file__).resolve().parents[2] / "docs" / "portal-clusterrole.yaml"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def portal_identity(handle: kubesim.Handle, path: Path) -> Path:
    """A ServiceAccount bound to the documented ClusterRole, and a kubeconfig with its token."""
    handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "gpu-portal-system"}})
    sa = {"metadata": {"name": "gpu-portal"}}
    handle.admin("POST", "/api/v1/namespaces/gpu-portal-system/serviceaccounts", sa)
    handle.admin("POST", f"{RBAC}/clusterroles", yaml.safe_load(ROLE.read_text()))
    binding = {
        "metadata": {"name": "gpu-portal"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gpu-portal",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "gpu-portal-system"}
        ],
    }
    handle.admin("POST", f"{RBAC}/clusterrolebindings", binding)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token_path = "/api/v1/namespaces/gpu-portal-system/serviceaccounts/gpu-portal/token"
    token = handle.admin("POST", token_path, request)["status"]["token"]
    config = yaml.safe_load(Path(handle.kubeconfig).read_text())
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def least_privileged_cluster(db: None, tmp_path: Path) -> Iterator[tuple[Cluster, Any]]:
    with kubesim.start(speed=50) as handle:
        kubeconfig = portal_identity(handle, tmp_path / "portal.kubeconfig")
        cluster = Cluster.objects.create(name="rbac", kubeconfig_path=str(kubeconfig))
        sync.refresh_inventory(cluster)
        yield cluster, handle
        cluster_ops.forget_gateways()


def settled(step: Any) -> bool:
    """Run a step that may ask to be retried (a namespace still terminating)."""
    try:
        step()
    except TransientKubeError:
        return False
    return True


def test_the_whole_flow_needs_nothing_beyond_the_documented_role(
    alice: User, least_privileged_cluster: tuple[Cluster, Any], caplog: Any
) -> None:
    cluster, _handle = least_privileged_cluster
    assert all(check.ok for check in cluster_ops.gateway_for(cluster).preflight())
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="alice-rbac")
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    carol = User.objects.create_user("carol-rbac", is_staff=True)
    services.claim_request_approve(user=carol, claim_request=claim)  # approves ns too
    cluster_ops.apply_claim(ClaimRequest.objects.get(pk=claim.pk))
    ns.refresh_from_db()
    assert (ns.state, ClaimRequest.objects.get(pk=claim.pk).state) == ("active", "waiting")
    access.grant_access(ns)
    ns.refresh_from_db()
    assert access.issue_kubeconfig(user=alice, namespace_request=ns).text

    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_ops.start_run(run)
    wait_until(
        lambda: sync.sync_cluster(cluster) and VerificationRun.objects.get(pk=run.pk).is_final,
        timeout=30,
    )
    run.refresh_from_db()
    assert run.state == "succeeded", run.state_message

    assert reconciler.reconcile() == 0
    services.namespace_request_delete(user=alice, namespace_request=ns)
    ns = NamespaceRequest.objects.get(pk=ns.pk)
    wait_until(lambda: settled(lambda: cluster_ops.delete_namespace(ns)), timeout=30)
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleted"
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""
    assert "forbidden" not in caplog.text.lower()


def test_the_followers_watches_need_nothing_beyond_the_documented_role(
    least_privileged_cluster: tuple[Cluster, Any],
) -> None:
    cluster, _handle = least_privileged_cluster
    gateway = cluster_ops.gateway_for(cluster)
    informers = [
        Informer(gateway, kind, managed_selector(), lambda obj: obj, lambda: None).start()
        for kind in ("ResourceClaim", "Pod", "ResourceSlice", "DeviceClass")  # the follower's
    ]
    try:
        # Listed, and each watch open: a refused list or watch leaves its words in error.
        wait_until(lambda: all(informer.watching for informer in informers), timeout=30)
        assert [informer.error for informer in informers] == ["", "", "", ""]
    finally:
        for informer in informers:
            informer.stop()
