"""A cluster that answers 403 is reachable, not down: registered with the kubeconfig of an
identity that may only read one namespace, it shows its server version, the admin reads the
permissions the portal lacks (asked of the cluster by SelfSubjectAccessReviews), data
scientists read only that the portal cannot use it yet, /readyz says degraded, the loop asks
again after minutes (not seconds, one warning), and it becomes usable by itself once granted."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.clusters import registry as cluster_registry
from claims.clusters.registry import KUBECONFIG, ClusterInput
from claims.kube import permissions
from claims.models import Cluster
from tests.claims.worker.test_cluster_loop import start_follower
from tests.claims.worker.test_least_privilege import RBAC, ROLE
from tests.fixtures.kubesim import (
    kubeconfig_for,
    role_binding,
    service_account_token,
    wait_until,
)
from tests.fixtures.portal import make_user

READER = "system:serviceaccount:team-a:reader"


def one_namespace_reader(handle: kubesim.Handle, path: Path) -> str:
    """A ServiceAccount bound to `view` in its own namespace only: its kubeconfig's text."""
    handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    handle.admin(
        "POST", "/api/v1/namespaces/team-a/serviceaccounts", {"metadata": {"name": "reader"}}
    )
    subject = {"kind": "ServiceAccount", "name": "reader", "namespace": "team-a"}
    binding = role_binding("reader-view", "view", [subject])
    handle.admin("POST", f"{RBAC}/namespaces/team-a/rolebindings", binding)
    token = service_account_token(handle, "team-a", "reader", expirationSeconds=86400)
    return Path(kubeconfig_for(handle, token, path, "team-a")).read_text()


def grant_the_portal_role(handle: kubesim.Handle) -> None:
    handle.admin("POST", f"{RBAC}/clusterroles", yaml.safe_load(ROLE.read_text()))
    subject = {"kind": "ServiceAccount", "name": "reader", "namespace": "team-a"}
    binding = {**role_binding("gpu-portal", "gpu-portal", [subject]), "kind": "ClusterRoleBinding"}
    handle.admin("POST", f"{RBAC}/clusterrolebindings", binding)


@pytest.fixture
def refusing(db: None, tmp_path: Path) -> Iterator[tuple[Cluster, kubesim.Handle]]:
    with kubesim.start(speed=50) as handle:
        text = one_namespace_reader(handle, tmp_path / "reader.kubeconfig")
        cluster = cluster_registry.save_cluster(
            ClusterInput("team-a-only", KUBECONFIG, text, "kubesim")
        )
        yield cluster, handle
        gateways.forget_gateways()


def every_needed_permission() -> list[str]:
    return [str(permission) for permission in permissions.needed()]


def test_the_needed_permissions_are_the_documented_cluster_role() -> None:
    role = yaml.safe_load(ROLE.read_text())
    documented = {
        (verb, group, resource, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }
    needed = {(p.verb, p.group, p.resource, p.name) for p in permissions.needed()}
    assert needed == documented
    assert len(permissions.needed()) == len(needed)


def test_a_cluster_that_refuses_the_identity_is_reachable_and_says_what_it_lacks(
    refusing: tuple[Cluster, kubesim.Handle],
) -> None:
    cluster, handle = refusing
    outcome = cluster_registry.contact(cluster)
    assert outcome.reachable and outcome.refused
    assert outcome.missing == every_needed_permission()
    assert "list resourceslices.resource.k8s.io" in outcome.missing
    assert "bind clusterroles.rbac.authorization.k8s.io edit" in outcome.missing
    assert outcome.problem.startswith("reachable, but the portal's identity may not: ")
    # /version and discovery are open to any authenticated identity
    assert cluster.server_version == handle.admin("GET", "/version")["gitVersion"]
    assert cluster.preferred_resource_version == "v1"
    assert [check.ok for check in outcome.preflight] == [True, True, True]
    assert cluster.unreachable_since is None
    assert cluster.refused_since is not None
    assert cluster.missing_permissions == every_needed_permission()
    assert cluster.last_error == outcome.problem


def test_an_admin_reads_the_missing_permissions_and_a_data_scientist_does_not(
    refusing: tuple[Cluster, kubesim.Handle], admin_user: User
) -> None:
    cluster, _ = refusing
    cluster_registry.contact(cluster)
    admin, alice = Client(), Client()
    admin.force_login(admin_user)
    alice.force_login(make_user("alice"))

    page = admin.get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert 'id="cluster-refused"' in page
    assert "<code>list resourceslices.resource.k8s.io</code>" in page
    assert "<code>watch deviceclasses.resource.k8s.io</code>" in page
    assert f'id="server-version">{cluster.server_version}<' in page
    assert "Unreachable" not in page
    listed = admin.get(reverse("clusters")).content.decode()
    assert "reachable, refused" in listed and "list resourceslices.resource.k8s.io" in listed

    theirs = alice.get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert "The portal cannot use this cluster yet" in theirs
    assert "resourceslices.resource.k8s.io" not in theirs
    assert READER not in theirs

    shown = admin.get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert shown["reachable"] is True
    assert shown["server_version"] == cluster.server_version
    assert shown["unreachable_since"] is None and shown["refused_since"]
    assert shown["missing_permissions"] == every_needed_permission()
    theirs_api = alice.get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert theirs_api["reachable"] is True
    assert theirs_api["missing_permissions"] == []
    assert theirs_api["last_error"].startswith("The portal cannot use this cluster yet")


def test_registering_it_through_the_api_answers_refused_not_unreachable(
    db: None, tmp_path: Path, admin_user: User
) -> None:
    with kubesim.start(speed=50) as handle:
        text = one_namespace_reader(handle, tmp_path / "reader.kubeconfig")
        client = Client()
        client.force_login(admin_user)
        data = {"name": "team-a-only", "kubeconfig": text}
        answer = client.post("/api/v1/clusters/", data, content_type="application/json")
        gateways.forget_gateways()
    assert answer.status_code == 201, answer.content
    contact = answer.json()["contact"]
    assert (contact["reachable"], contact["refused"]) == (True, True)
    assert "list resourceslices.resource.k8s.io" in contact["missing"]
    assert answer.json()["cluster"]["missing_permissions"] == contact["missing"]


def test_a_cluster_that_does_not_answer_is_still_unreachable(
    db: None, tmp_path: Path, admin_user: User
) -> None:
    with kubesim.start(speed=50) as handle:
        text = Path(handle.kubeconfig).read_text()
    cluster = cluster_registry.save_cluster(ClusterInput("gone", KUBECONFIG, text, "kubesim"))
    outcome = cluster_registry.contact(cluster)
    gateways.forget_gateways()
    assert not outcome.reachable and not outcome.refused
    assert cluster.unreachable_since is not None and cluster.refused_since is None


def refusal_warnings(caplog: pytest.LogCaptureFixture) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in caplog.records:
        message = record.getMessage()
        if record.levelno == logging.WARNING and "refuses to let the portal watch" in message:
            kind = message.split("watch ")[1].split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


@pytest.mark.django_db(transaction=True)
@override_settings(FOLLOWER_REFUSED_RETRY_SECONDS=0.8, FOLLOWER_LEASE_SECONDS=3)
def test_the_loop_backs_off_refused_watches_and_follows_once_granted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    caplog.set_level(logging.INFO)
    settings.READYZ_CHECK_FOLLOWERS = True
    with kubesim.start(speed=50) as handle:
        text = one_namespace_reader(handle, tmp_path / "reader.kubeconfig")
        cluster = cluster_registry.save_cluster(
            ClusterInput("team-a-only", KUBECONFIG, text, "kubesim")
        )
        loop, stop = start_follower(cluster, holder="refused-follower")
        try:
            wait_until(lambda: loop.watched is not None, timeout=30)
            slices = loop.watched.slices
            # 1/16 of the most, doubling, up to the most: never the 0.5 s of an outage
            wait_until(lambda: len(slices.retry_waits) >= 6, timeout=60)
            assert slices.retry_waits[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 0.8]
            assert slices.retry_at is not None
            assert refusal_warnings(caplog).get("ResourceSlice") == 1  # once, not each retry

            def recorded() -> Cluster:
                return Cluster.objects.get(pk=cluster.pk)

            wait_until(lambda: recorded().refused_since is not None, timeout=30)
            row = recorded()
            assert row.unreachable_since is None
            assert "list resourceslices.resource.k8s.io" in row.missing_permissions
            assert row.server_version  # discovery is open to it

            readyz = Client().get("/readyz")
            assert readyz.status_code == 200
            assert readyz.json()["status"] == "degraded"
            check = readyz.json()["checks"]["clusters"]["team-a-only"]
            assert check["ok"] is False and check["degraded"] is True
            assert "list resourceslices.resource.k8s.io" in check["error"]

            grant_the_portal_role(handle)  # no restart: the loop finds out by itself
            wait_until(lambda: recorded().refused_since is None, timeout=60)
            assert recorded().missing_permissions == []
            assert recorded().last_error == ""
            wait_until(lambda: all(i.current_at for i in loop.watched.all()), timeout=30)
            assert not any(i.refused for i in loop.watched.all())
            wait_until(lambda: Client().get("/readyz").json()["status"] == "ok", timeout=30)
        finally:
            stop()
            gateways.forget_gateways()
