"""The reconciler removes the portal's objects whose request is gone from the database, and
nothing else: not unlabelled objects, not another installation's, not live requests' (kubesim)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import override_settings

import kubesim
from claims.clusters import gateways
from claims.models import (
    INSTANCE_LABEL,
    AuditEvent,
    Cluster,
    NamespaceRequest,
    managed_labels,
)
from claims.worker import reconciler
from tests.claims.domain.test_expiry import applied_claim
from tests.claims.worker.test_least_privilege import RBAC, ROLE, portal_identity
from tests.fixtures.portal import allocation_in, register_cluster

pytestmark = pytest.mark.django_db
GONE = 2**40  # no request has this id


@pytest.fixture
def own_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    """A kubesim of the test's own: the session's keeps the objects of earlier tests, whose
    rows are gone with their transactions, so they are orphans too."""
    yield register_cluster(kubesim_private, name="own")
    gateways.forget_gateways()


def namespace(handle: kubesim.Handle, labels: dict[str, str]) -> str:
    name = f"orphan-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    handle.admin("POST", "/api/v1/namespaces", body)
    return name


def resource_claim(handle: kubesim.Handle, ns: str, labels: dict[str, str]) -> str:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train", "namespace": ns, "labels": labels},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                ]
            }
        },
    }
    handle.admin("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", body)
    return "train"


def service_account(handle: kubesim.Handle, ns: str, labels: dict[str, str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "gpu", "labels": labels},
    }
    handle.admin("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body)


def present(handle: kubesim.Handle, path: str) -> bool:
    """There and not on its way out."""
    try:
        found = handle.admin("GET", path)
    except Exception as error:
        if getattr(error, "code", None) == 404:
            return False
        raise
    return not found["metadata"].get("deletionTimestamp")


def claim_path(ns: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/train"


def test_it_removes_labelled_objects_whose_request_is_gone(
    alice: User, carol: User, own_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    gone_ns = managed_labels() | {"gpu-portal.io/namespace-request": str(GONE)}
    orphan_ns = namespace(kubesim_private, gone_ns)
    resource_claim(kubesim_private, orphan_ns, gone_ns | {"gpu-portal.io/claim-request": str(GONE)})
    service_account(kubesim_private, orphan_ns, gone_ns)
    # A claim of ours in a namespace that is still ours: only the claim is the orphan.
    live = applied_claim(alice, carol, own_cluster)
    live_ns = live.namespace_request
    orphan_in_live = managed_labels() | {
        "gpu-portal.io/namespace-request": str(live_ns.pk),
        "gpu-portal.io/claim-request": str(GONE),
    }
    extra_ns = namespace(kubesim_private, {"team": "vision"})
    resource_claim(kubesim_private, extra_ns, orphan_in_live)

    removed = reconciler.sweep_orphans()

    assert removed == 4  # the orphan namespace, its claim and ServiceAccount, the stray claim
    assert not present(kubesim_private, f"/api/v1/namespaces/{orphan_ns}")
    assert not present(kubesim_private, claim_path(orphan_ns))
    assert not present(kubesim_private, claim_path(extra_ns))
    # The live request's namespace and claim, and the unlabelled namespace, stay.
    assert present(kubesim_private, f"/api/v1/namespaces/{live_ns.name}")
    assert present(kubesim_private, claim_path(live.namespace))
    assert present(kubesim_private, f"/api/v1/namespaces/{extra_ns}")
    assert reconciler.sweep_orphans() == 0

    # One audit row per object deleted, on the cluster's trail, by the system.
    rows = AuditEvent.objects.filter(action="deleted", object_kind="cluster").order_by("id")
    deleted = {(row.before["kind"], row.before["namespace"], row.before["name"]) for row in rows}
    assert deleted == {
        ("ResourceClaim", orphan_ns, "train"),
        ("ServiceAccount", orphan_ns, "gpu"),
        ("Namespace", "", orphan_ns),
        ("ResourceClaim", extra_ns, "train"),
    }
    stray = next(row for row in rows if row.before["namespace"] == extra_ns)
    assert (stray.object_id, stray.object_name, stray.channel) == (own_cluster.pk, "own", "system")
    assert stray.actor is None and stray.before["uid"]
    assert stray.before["labels"]["gpu-portal.io/claim-request"] == str(GONE)
    assert stray.message == (
        f"Deleted orphan ResourceClaim {extra_ns}/train from the cluster: its request is gone."
    )


def test_it_never_touches_unlabelled_objects_or_another_installations(
    own_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    kubectl_ns = namespace(kubesim_private, {})
    resource_claim(kubesim_private, kubectl_ns, {"gpu-portal.io/claim-request": str(GONE)})
    staging = managed_labels() | {
        INSTANCE_LABEL: "staging",
        "gpu-portal.io/namespace-request": str(GONE),
    }
    staging_ns = namespace(kubesim_private, staging)
    # Ours but naming no request: nothing proves it is an orphan.
    anonymous_ns = namespace(kubesim_private, managed_labels())

    assert reconciler.sweep_orphans() == 0
    for name in (kubectl_ns, staging_ns, anonymous_ns):
        assert present(kubesim_private, f"/api/v1/namespaces/{name}")
    assert present(kubesim_private, claim_path(kubectl_ns))

    with override_settings(PORTAL_INSTANCE="staging"):
        assert reconciler.sweep_orphans() == 1  # staging's own sweep removes its orphan
    assert not present(kubesim_private, f"/api/v1/namespaces/{staging_ns}")


def test_it_keeps_the_objects_of_every_request_in_the_database(
    alice: User, carol: User, own_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    claim = applied_claim(alice, carol, own_cluster)
    assert NamespaceRequest.objects.filter(pk=claim.namespace_request_id).exists()
    assert reconciler.sweep_orphans() == 0
    assert present(kubesim_private, claim_path(claim.namespace))
    assert allocation_in(kubesim_private, claim) is None


def test_it_reports_an_unreachable_cluster_and_goes_on(
    own_cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    stopped = kubesim.start(speed=50)
    gone = Cluster.objects.create(name="gone", kubeconfig_path=stopped.kubeconfig, simulated=True)
    gateways.gateway_for(gone)  # connected while its kubeconfig is there
    stopped.stop()
    orphan = namespace(
        kubesim_private, managed_labels() | {"gpu-portal.io/namespace-request": str(GONE)}
    )
    assert reconciler.sweep_orphans() == 1
    assert not present(kubesim_private, f"/api/v1/namespaces/{orphan}")


def test_a_kind_the_portal_may_not_list_leaves_the_others_swept(db: None, tmp_path: Path) -> None:
    with kubesim.start(speed=50) as handle:
        kubeconfig = portal_identity(handle, tmp_path / "portal.kubeconfig")
        role = yaml.safe_load(ROLE.read_text())
        role["rules"] = [r for r in role["rules"] if "resourcequotas" not in r["resources"]]
        handle.admin("PUT", f"{RBAC}/clusterroles/gpu-portal", role)
        Cluster.objects.create(name="rbac", kubeconfig_path=str(kubeconfig))
        orphan = namespace(
            handle, managed_labels() | {"gpu-portal.io/namespace-request": str(GONE)}
        )
        try:
            assert reconciler.sweep_orphans() == 1
        finally:
            gateways.forget_gateways()
        assert not present(handle, f"/api/v1/namespaces/{orphan}")
