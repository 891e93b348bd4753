"""The whole flow works with exactly deploy/base/clusterrole.yaml, on a kubesim that enforces
RBAC as the API server does, and uses every permission in it: kubesim records each decision
its authorizer makes (as an API server's audit log does), so a permission the portal starts to
use fails the flow with a 403, and one it stops using fails the comparison with the role."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.utils import timezone

import kubesim
from claims.clusters import gateways
from claims.domain import access, services
from claims.kube.gateway import TransientKubeError
from claims.kube.kueue import pending_path
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    TeamQuota,
    VerificationRun,
    Workload,
)
from claims.worker import cluster_steps, reconciler, sync, workload_steps
from claims.worker.cluster_loop import ClusterLoop
from kubesim.auth.audit import Decision
from kubesim.auth.authentication import UserInfo
from kubesim.auth.rbac import Attributes, rule_allows
from tests.fixtures.kubesim import raw_request, wait_until
from tests.fixtures.kueue import kueue_topology, make_queues
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

ROLE = Path(__file__).resolve().parents[3] / "deploy" / "base" / "clusterrole.yaml"
PORTAL = "system:serviceaccount:gpu-portal-system:gpu-portal"
BY_THE_ROLE = 'by ClusterRoleBinding "gpu-portal" of ClusterRole "gpu-portal"'
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
    # v1alpha3 served: the follower also lists and watches DeviceTaintRules.
    served = ("v1", "v1beta2", "v1beta1", "v1alpha3")
    with kubesim.start(speed=50, served_versions=served) as handle:
        kubeconfig = portal_identity(handle, tmp_path / "portal.kubeconfig")
        cluster = Cluster.objects.create(name="rbac", kubeconfig_path=str(kubeconfig))
        sync.refresh_inventory(cluster)
        yield cluster, handle
        gateways.forget_gateways()


def settled(step: Any) -> bool:
    """Run a step that may ask to be retried (a namespace still terminating)."""
    try:
        step()
    except TransientKubeError:
        return False
    return True


def run_the_whole_flow(alice: User, cluster: Cluster, handle: kubesim.Handle) -> None:
    """A namespace, its quota, a claim, access, a kubeconfig, a run, workloads; then deleted."""
    assert all(check.ok for check in gateways.gateway_for(cluster).preflight())
    team_quota = with_a_team_quota(alice, cluster)
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="alice-rbac")
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    carol = User.objects.create_user("carol-rbac", is_staff=True)
    services.claim_request_approve(user=carol, claim_request=claim)  # approves ns too
    cluster_steps.apply_claim(ClaimRequest.objects.get(pk=claim.pk))
    ns.refresh_from_db()
    assert (ns.state, ClaimRequest.objects.get(pk=claim.pk).state) == ("active", "waiting"), (
        ns.state_message
    )
    access.grant_access(ns)
    ns.refresh_from_db()
    assert access.issue_kubeconfig(user=alice, namespace_request=ns).text
    assert run_to_the_end(alice, claim, cluster).startswith("succeeded")
    assert reconciler.reconcile() + reconciler.look_at_cluster(cluster) == 0
    a_pending_run_explained(alice, claim, cluster, handle)

    every_step_again_after_a_crash(alice, ns, claim)
    workloads_started_and_stopped(alice, claim)
    drift_repaired(ns, claim, cluster, handle)
    team_quota.delete()
    cluster_steps.apply_namespace_quota(NamespaceRequest.objects.get(pk=ns.pk))  # removed
    reconciler.sweep_orphans()
    released(alice, claim)
    deleted(alice, ns)
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""


def with_a_team_quota(user: User, cluster: Cluster) -> TeamQuota:
    team = Team.objects.create(name="rbac-team")
    TeamMembership.objects.create(team=team, user=user)
    return TeamQuota.objects.create(
        team=team, cluster=cluster, device_class="gpu.nvidia.com", max_devices=4
    )


def run_to_the_end(alice: User, claim: ClaimRequest, cluster: Cluster) -> str:
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    wait_until(
        lambda: sync.sync_cluster(cluster) and VerificationRun.objects.get(pk=run.pk).is_final,
        timeout=30,
    )
    run.refresh_from_db()
    return f"{run.state} {run.state_message}".strip()


def a_pending_run_explained(
    alice: User, claim: ClaimRequest, cluster: Cluster, handle: kubesim.Handle
) -> None:
    """A run whose Pod no node takes (every node cordoned): the sync reads the Pod's Warning
    Events to say why it waits."""
    cordon(handle, True)
    try:
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        wait_until(
            lambda: (
                sync.sync_cluster(cluster)
                and bool(VerificationRun.objects.get(pk=run.pk).pod_warnings)
            ),
            timeout=30,
        )
        services.verification_run_cancel(user=alice, run=VerificationRun.objects.get(pk=run.pk))
    finally:
        cordon(handle, False)


def cordon(handle: kubesim.Handle, unschedulable: bool) -> None:
    """As kubectl cordon and uncordon do, with the cluster admin's token."""
    patch = {"spec": {"unschedulable": unschedulable or None}}
    for node in handle.admin("GET", "/api/v1/nodes")["items"]:
        path = f"/api/v1/nodes/{node['metadata']['name']}"
        answer = raw_request(
            handle, "PATCH", path, patch, content_type="application/merge-patch+json"
        )
        assert answer.status == 200, answer.body


def every_step_again_after_a_crash(alice: User, ns: NamespaceRequest, claim: ClaimRequest) -> None:
    """A task that died after its write and before recording it runs again: it finds its
    objects and applies them (patch). Then a run cancelled while it runs (its Pod deleted)."""
    NamespaceRequest.objects.filter(pk=ns.pk).update(access_granted_at=None)
    access.grant_access(NamespaceRequest.objects.get(pk=ns.pk))
    cluster_steps.apply_namespace_quota(NamespaceRequest.objects.get(pk=ns.pk))
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    VerificationRun.objects.filter(pk=run.pk).update(state=VerificationRun.State.CREATING)
    cluster_steps.start_run(VerificationRun.objects.get(pk=run.pk), resume=True)  # its retry
    run = services.verification_run_cancel(user=alice, run=VerificationRun.objects.get(pk=run.pk))
    cluster_steps.delete_run_pod(run)


def workloads_started_and_stopped(alice: User, claim: ClaimRequest) -> None:
    """A notebook (Pod, Service, Ingress) and a batch Job, each started, started again by the
    retry of a worker that died after creating them (they are adopted), and stopped; one more
    Job is left for the claim's release to remove."""
    names = (JUPYTER, BATCH)
    for name in names:
        workload = services.workload_start(
            user=alice,
            claim_request=ClaimRequest.objects.get(pk=claim.pk),
            profile=seeded_profile(name),
        )
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
        Workload.objects.filter(pk=workload.pk).update(state=Workload.State.APPLYING)
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk), resume=True)
        assert Workload.objects.get(pk=workload.pk).state == "started"
        stopped = services.workload_stop(user=alice, workload=Workload.objects.get(pk=workload.pk))
        workload_steps.delete_workload(stopped)
        assert Workload.objects.get(pk=workload.pk).cleaned_up_at
    left = services.workload_start(
        user=alice,
        claim_request=ClaimRequest.objects.get(pk=claim.pk),
        profile=seeded_profile(BATCH),
    )
    workload_steps.start_workload(Workload.objects.get(pk=left.pk))


def drift_repaired(
    ns: NamespaceRequest, claim: ClaimRequest, cluster: Cluster, handle: kubesim.Handle
) -> None:
    """Someone takes the portal's labels off its namespace and claim: they are put back."""
    claim = ClaimRequest.objects.get(pk=claim.pk)
    paths = (
        f"/api/v1/namespaces/{ns.name}",
        f"/apis/{claim.applied_api_version}/namespaces/{ns.name}/resourceclaims/{claim.name}",
    )
    for path in paths:
        unlabel = {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
        patched = raw_request(
            handle, "PATCH", path, unlabel, content_type="application/merge-patch+json"
        )
        assert patched.status == 200, patched.body
    an_hour_ago = timezone.now() - timedelta(hours=1)
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=an_hour_ago)
    ClaimRequest.objects.filter(pk=claim.pk).update(applied_at=an_hour_ago)
    reconciler.look_at_cluster(cluster)
    sync.sync_cluster(cluster)
    for path in paths:
        labels = handle.admin("GET", path)["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpu-portal", path


def released(alice: User, claim: ClaimRequest) -> None:
    claim = services.claim_request_release(user=alice, claim_request=claim)
    wait_until(lambda: settled(lambda: cluster_steps.delete_claim(claim)), timeout=30)
    assert ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at


def deleted(alice: User, ns: NamespaceRequest) -> None:
    services.namespace_request_delete(user=alice, namespace_request=ns)
    ns = NamespaceRequest.objects.get(pk=ns.pk)
    wait_until(lambda: settled(lambda: cluster_steps.delete_namespace(ns)), timeout=30)
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleted"


def open_the_followers_watches(cluster: Cluster) -> None:
    """The loop's own informers, every kind it follows, each listed and then watched."""
    loop = ClusterLoop(cluster.pk, threading.Event())
    informers = loop.watches(gateways.gateway_for(cluster), taint_rules=True).all()
    # claims, Pods, slices, classes, the CHECKED_KINDS, claims made outside the portal,
    # DeviceTaintRules and the workloads' Jobs
    assert len(informers) == 11
    for informer in informers:
        informer.start()
    try:
        # A refused list or watch leaves its words in error, and the watch never opens.
        wait_until(lambda: all(informer.watching for informer in informers), timeout=30)
        assert [informer.error for informer in informers] == [""] * len(informers)
    finally:
        for informer in informers:
            informer.stop()


def atomic_rules(role: dict[str, Any]) -> list[dict[str, Any]]:
    """Each (group, resource, verb) the role grants as a rule of its own."""
    return [
        {**rule, "apiGroups": [group], "resources": [resource], "verbs": [verb]}
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]


def attributes(decision: Decision) -> Attributes:
    return Attributes(
        UserInfo(decision.user),
        decision.verb,
        "",
        decision.resource_request,
        decision.api_group,
        decision.namespace,
        decision.resource,
        decision.subresource,
        decision.name,
    )


def described(rule: dict[str, Any]) -> str:
    names = f" {rule['resourceNames']}" if rule.get("resourceNames") else ""
    return f"{rule['apiGroups'][0] or 'core'}/{rule['resources'][0]} {rule['verbs'][0]}{names}"


def unused_rules(role: dict[str, Any], decisions: list[Decision]) -> list[str]:
    """What the role grants that no request the role allowed needed."""
    used = [attributes(d) for d in decisions if d.allowed and BY_THE_ROLE in d.reason]
    return [
        described(rule)
        for rule in atomic_rules(role)
        if not any(rule_allows(attrs, rule) for attrs in used)
    ]


def refused(decisions: list[Decision]) -> list[str]:
    return [f"{d.api_group or 'core'}/{d.resource} {d.verb} {d.subresource}".strip()
            for d in decisions if not d.allowed]  # fmt: skip


def test_the_role_grants_exactly_what_the_whole_flow_and_the_follower_use(
    alice: User, least_privileged_cluster: tuple[Cluster, Any], caplog: Any, settings: Any
) -> None:
    cluster, handle = least_privileged_cluster
    settings.NOTEBOOK_HOST_PATTERN = "{name}.{namespace}.nb.example.org"
    settings.NOTEBOOK_INGRESS_CLASS = "nginx"
    run_the_whole_flow(alice, cluster, handle)
    open_the_followers_watches(cluster)
    decisions = handle.api.authorizer.decisions.of(PORTAL)
    assert refused(decisions) == []
    assert "forbidden" not in caplog.text.lower()
    # Kueue's rules are used where Kueue runs: the test below.
    assert unused_rules(without_kueue(yaml.safe_load(ROLE.read_text())), decisions) == []
    # Nothing else the portal did needed more than what every authenticated identity holds.
    others = {d.reason for d in decisions if d.resource_request and BY_THE_ROLE not in d.reason}
    assert all('ClusterRoleBinding "system:' in reason for reason in others), others


def kueue_rule(rule: dict[str, Any]) -> bool:
    return any("kueue" in group for group in rule["apiGroups"]) or (
        rule.get("resourceNames") == ["kueue-manager-config"]
    )


def without_kueue(role: dict[str, Any]) -> dict[str, Any]:
    return {**role, "rules": [rule for rule in role["rules"] if not kueue_rule(rule)]}


def only_kueue(role: dict[str, Any]) -> dict[str, Any]:
    return {**role, "rules": [rule for rule in role["rules"] if kueue_rule(rule)]}


def test_where_kueue_runs_the_role_grants_what_following_it_uses(
    alice: User, tmp_path: Path
) -> None:
    """Kueue's Workloads watched, its queues and Configuration read by preflight, a pending
    Job's position read from its visibility API: allowed, and every Kueue rule used."""
    with kubesim.start(speed=50, topology=kueue_topology()) as handle:
        kubeconfig = portal_identity(handle, tmp_path / "portal.kubeconfig")
        cluster = Cluster.objects.create(name="rbac-kueue", kubeconfig_path=str(kubeconfig))
        sync.refresh_inventory(cluster)
        try:
            assert cluster.kueue
            make_queues(handle, "default")
            gateway = gateways.gateway_for(cluster)
            assert [c.name for c in gateway.preflight() if "Kueue" in c.name]
            gateway.read_path(pending_path("default", "default"))
            loop = ClusterLoop(cluster.pk, threading.Event())
            informer = loop.watches(gateway, kueue=True).kueue_workloads
            assert informer is not None
            informer.start()
            try:
                wait_until(lambda: informer.watching, timeout=30)
            finally:
                informer.stop()
            decisions = handle.api.authorizer.decisions.of(PORTAL)
            kueue_refused = [line for line in refused(decisions) if "kueue" in line]
            assert kueue_refused == []
            assert unused_rules(only_kueue(yaml.safe_load(ROLE.read_text())), decisions) == []
        finally:
            gateways.forget_gateways()


def test_it_reports_a_refused_request_and_an_unused_grant() -> None:
    role = {"rules": [{"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list"]}]}
    by_role = f"RBAC: allowed {BY_THE_ROLE} to ServiceAccount"
    pods = Decision(PORTAL, "list", "", "pods", "", "ns", "", True, True, by_role)
    evict = Decision(PORTAL, "create", "", "pods", "eviction", "ns", "p", True, False, "")
    assert unused_rules(role, [pods, evict]) == ["core/nodes list"]
    assert refused([pods, evict]) == ["core/pods create eviction"]
