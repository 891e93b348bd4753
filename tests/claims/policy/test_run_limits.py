"""Verification runs on a real cluster's terms: images from settings, a deadline, no Pod
followed for ever (kubesim's kubelet fails unknown images as a node would)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone

from claims.domain import services
from claims.models import Cluster, VerificationRun
from claims.worker import cluster_steps, sync
from tests.claims.worker.test_cluster_ops import approved_claim
from tests.fixtures.kubesim import wait_until
from tests.fixtures.portal import pods_in

MIRROR = "registry.airgap.example/nvidia/k8s/cuda-sample"


def started_run(user: User, cluster: Cluster) -> VerificationRun:
    claim = approved_claim(user, cluster)
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=user, claim_request=claim)
    cluster_steps.start_run(run)
    run.refresh_from_db()
    return run


def pod_of(handle: Any, run: VerificationRun) -> dict:
    path = f"/api/v1/namespaces/{run.claim.namespace}/pods/{run.pod_name}"
    return handle.admin("GET", path)


@override_settings(
    VECTOR_ADD_IMAGE=f"{MIRROR}:vectoradd-cuda12.5.0",
    DEVICE_QUERY_IMAGE=f"{MIRROR}:devicequery",
    RUN_ACTIVE_DEADLINE_SECONDS=120,
)
def test_it_takes_images_deadline_and_pull_secret_from_settings(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(image_pull_secret="mirror-credentials")
    cluster.refresh_from_db()
    run = started_run(alice, cluster)
    spec = pod_of(kubesim_cluster, run)["spec"]
    assert [c["image"] for c in spec["containers"]] == [
        f"{MIRROR}:vectoradd-cuda12.5.0",
        f"{MIRROR}:devicequery",
    ]
    assert spec["imagePullSecrets"] == [{"name": "mirror-credentials"}]
    assert spec["activeDeadlineSeconds"] == 120


def unpullable_pod_waiting(handle: Any, run: VerificationRun) -> bool:
    statuses = pod_of(handle, run).get("status", {}).get("containerStatuses") or []
    reasons = {(s.get("state", {}).get("waiting") or {}).get("reason") for s in statuses}
    return bool(reasons & {"ErrImagePull", "ImagePullBackOff"})


@override_settings(VECTOR_ADD_IMAGE="nvcr.io/nvidia/k8s/cuda-sample:no-such-tag")
def test_a_run_whose_image_never_pulls_ends_failed_with_the_reason(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    run = started_run(alice, cluster)
    wait_until(lambda: unpullable_pod_waiting(kubesim_cluster, run), timeout=15)
    sync.sync_cluster(cluster)
    assert VerificationRun.objects.get(pk=run.pk).state in ("pending", "running")
    a_while_ago = timezone.now() - timedelta(hours=1)
    VerificationRun.objects.filter(pk=run.pk).update(created=a_while_ago)
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert run.state == "failed"
    assert "did not start within 300 seconds" in run.state_message
    assert "ctr0: ErrImagePull" in run.state_message or "ImagePullBackOff" in run.state_message
    assert run.pod_name not in pods_in(kubesim_cluster, run.claim.namespace)


def unschedulable(handle: Any, run: VerificationRun) -> bool:
    conditions = pod_of(handle, run).get("status", {}).get("conditions") or []
    return any(c.get("reason") == "Unschedulable" for c in conditions)


def test_a_run_that_cannot_be_scheduled_ends_failed_with_the_schedulers_words(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = approved_claim(alice, cluster)
    claim.selector = 'device.attributes["gpu.nvidia.com"].productName == "No Such GPU"'
    claim.save(update_fields=["selector"])
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    run.refresh_from_db()
    wait_until(lambda: unschedulable(kubesim_cluster, run), timeout=15)
    VerificationRun.objects.filter(pk=run.pk).update(created=timezone.now() - timedelta(hours=1))
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert run.state == "failed"
    assert "did not start within" in run.state_message
    assert "Unschedulable" in run.state_message or "nodes are available" in run.state_message
