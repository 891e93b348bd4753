"""A claim of several GPUs (or of all matching devices) on its page, its release confirmation
and the dashboard: each says how many it asked for and lists every device it got (issue 20:
a claim of 4 GPUs read as one)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from claims.domain import observations, run_observations, services
from claims.kube import manifests
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import GPU_CLASS, client_for, h100

TIMES = "\N{MULTIPLICATION SIGN}"


def text_of(content: str) -> str:
    """The page's words as a reader sees them: tags out, white space as single spaces."""
    return " ".join(re.sub(r"<[^>]+>", " ", content).split())


def page(user: User, name: str, *args: object) -> str:
    response = client_for(user).get(reverse(name, args=list(args)))
    assert response.status_code == 200
    return response.content.decode()


def allocated(count: int) -> dict[str, Any]:
    """As the sync describes an allocation: one entry per device, its name under "device"."""
    devices = []
    for index in range(count):
        device = h100(index)
        device["device"] = device.pop("name")
        devices.append({"request": "gpu", **device})
    return {"node": "gpu-node-1", "devices": devices, "reserved_for": ["alice-ml/train-4"]}


@pytest.fixture
def four_gpus(cluster: Cluster) -> Cluster:
    cluster.inventory = {
        **cluster.inventory,
        "devices": [h100(index) for index in range(4)],
        "device_counts": {GPU_CLASS: 4, "mig.nvidia.com": 0},
    }
    cluster.save()
    return cluster


def applied_claim(
    namespace: NamespaceRequest, charlie: User, count: int | None, all_devices: bool = False
) -> ClaimRequest:
    claim = services.claim_request_submit(
        user=namespace.owner,
        namespace_request=namespace,
        name="train-4",
        device_class=GPU_CLASS,
        count=count,
        all_devices=all_devices,
    )
    services.claim_request_approve(user=charlie, claim_request=claim)
    manifest = manifests.resource_claim_manifest(
        api_version="v1",
        namespace=namespace.name,
        name=claim.name,
        device_class=GPU_CLASS,
        count=count,
        labels=claim.labels(),
    )
    observations.claim_applying(claim_request=claim)
    observations.claim_applied(claim_request=claim, api_version="v1", manifest=manifest)
    return claim


@pytest.fixture
def claim_of_four(four_gpus: Cluster, namespace: NamespaceRequest, charlie: User) -> ClaimRequest:
    return applied_claim(namespace, charlie, count=4)


def test_it_says_a_claim_asks_for_four_gpus(claim_of_four: ClaimRequest) -> None:
    said = text_of(page(claim_of_four.owner, "claim", claim_of_four.pk))
    assert "Devices 4 GPUs" in said
    assert "DRA holds none of its 4 GPUs" in said
    assert "DRA holds no GPU for it" not in said


def test_it_counts_and_lists_the_four_gpus_a_claim_holds(claim_of_four: ClaimRequest) -> None:
    observations.claim_allocation_seen(claim_request=claim_of_four, allocation=allocated(4))
    content = page(claim_of_four.owner, "claim", claim_of_four.pk)
    assert "4 GPUs allocated on node gpu-node-1" in text_of(content)
    table = re.search(r'<table class="devices">(.*?)</table>', content, re.S)
    assert table is not None
    assert re.findall(r"<code>(gpu-\d)</code>", table.group(1)) == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
        "gpu-3",
    ]
    confirmation = text_of(page(claim_of_four.owner, "claim-release", claim_of_four.pk))
    assert "which frees the 4 GPUs it holds on gpu-node-1" in confirmation


def test_it_keeps_one_gpu_singular(claim: ClaimRequest) -> None:
    said = text_of(page(claim.owner, "claim", claim.pk))
    assert "Devices 1 GPU " in said


def test_it_says_a_claim_of_all_devices_takes_them_on_one_node(
    four_gpus: Cluster, namespace: NamespaceRequest, charlie: User
) -> None:
    claim = applied_claim(namespace, charlie, count=None, all_devices=True)
    said = text_of(page(claim.owner, "claim", claim.pk))
    assert "Devices all matching devices on one node" in said
    assert "allocates all matching devices on one node" in said


def test_it_lists_every_device_of_a_claim_on_the_dashboard(claim_of_four: ClaimRequest) -> None:
    observations.claim_allocation_seen(claim_request=claim_of_four, allocation=allocated(4))
    run = services.verification_run_start(user=claim_of_four.owner, claim_request=claim_of_four)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_pod_observed(
        run=run, phase="Running", node="gpu-node-1", devices=allocated(4)["devices"]
    )
    VerificationRun.objects.filter(pk=run.pk).update(device_name="NVIDIA H100 80GB HBM3")
    content = page(claim_of_four.owner, "dashboard")
    row = re.search(rf'<tr id="claim-{claim_of_four.pk}">(.*?)</tr>', content, re.S)
    assert row is not None
    assert f"4{TIMES} gpu.nvidia.com" in text_of(row.group(1))
    listed = ", ".join(f"<code>gpu-{index}</code>" for index in range(4))
    assert f"gpu-node-1: {listed}" in row.group(1)
    run_row = re.search(rf'<tr id="run-{run.pk}">(.*?)</tr>', content, re.S)
    assert run_row is not None
    assert f"4 {TIMES} NVIDIA H100 80GB HBM3" in text_of(run_row.group(1))
