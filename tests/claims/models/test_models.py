"""Model rules the database itself enforces, and the labels put on cluster objects."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError

from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun


@pytest.fixture
def cluster(db: None) -> Cluster:
    return Cluster.objects.create(name="lab", inventory={"device_counts": {"gpu.nvidia.com": 8}})


def test_it_allows_one_live_namespace_per_name(alice: User, cluster: Cluster) -> None:
    NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-a")
    with pytest.raises(IntegrityError):
        NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-a")


def test_it_frees_a_name_once_rejected_or_deleted(alice: User, cluster: Cluster) -> None:
    NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="a", state="rejected")
    NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="a", state="deleted")
    NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="a")
    assert NamespaceRequest.objects.filter(name="a").count() == 3


def test_it_allows_one_live_claim_per_name_in_a_namespace(alice: User, cluster: Cluster) -> None:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-a")
    fields = {"owner": alice, "namespace_request": ns, "name": "x", "device_class": "g"}
    ClaimRequest.objects.create(**fields, state="released")
    ClaimRequest.objects.create(**fields)
    with pytest.raises(IntegrityError):
        ClaimRequest.objects.create(**fields)


def test_it_labels_what_it_puts_in_the_cluster(alice: User, cluster: Cluster) -> None:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-a")
    claim = ClaimRequest.objects.create(
        owner=alice, namespace_request=ns, name="x", device_class="g"
    )
    run = VerificationRun.objects.create(claim=claim, owner=alice)
    assert run.labels() == {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/instance": "default",
        "gpu-portal.io/namespace-request": str(ns.pk),
        "gpu-portal.io/claim-request": str(claim.pk),
        "gpu-portal.io/verification-run": str(run.pk),
    }


def test_it_reads_device_counts_from_the_inventory(cluster: Cluster) -> None:
    assert cluster.device_count("gpu.nvidia.com") == 8
    assert cluster.device_count("mig.nvidia.com") == 0


def test_it_shows_states_as_the_design_names_them() -> None:
    assert ClaimRequest.State.IN_USE.label == "in use"
    assert [s.value for s in VerificationRun.State] == [
        "queued",
        "creating",
        "pending",
        "running",
        "succeeded",
        "failed",
    ]
