"""The queue in a real browser (issue 25.5), with a real Celery worker and the cluster loops,
against kubesim: a one-GPU cluster made full by another team's Pod that asks for
`nvidia.com/gpu` (the scheduler's extended-resource claim holds the GPU). alice's approved
claim waits at position 1, with the portal's reason and an honest estimate, on her claim's
page and her job's page; the other team's Pod ends, and her job starts by itself: the open
page shows it running and then succeeding, without a reload."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.urls import reverse
from kubernetes import client
from playwright.sync_api import Page, expect

import kubesim
from claims.clusters import gateways
from claims.models import Cluster, Workload
from tests.claims.worker.test_workload_steps import waiting_claim
from tests.e2e.conftest import KUBELET_SPEED, log_in, screenshot
from tests.e2e.test_flow import assert_not_reloaded
from tests.e2e.test_workloads_flow import TO_RUN, TRAIN, start
from tests.fixtures.kubesim import api_client, create_namespace
from tests.fixtures.portal import PASSWORD, register_cluster, wait_until
from tests.fixtures.workloads import BATCH, seeded_profile

pytestmark = pytest.mark.e2e
CLASS = "gpu.nvidia.com"


def _one_gpu_topology() -> str:
    topology = {
        "nodes": [{"name": "gpu-node-1", "gpus": [{"model": "A100-SXM4-40GB", "count": 1}]}]
    }
    path = Path(tempfile.gettempdir()) / f"kubesim-one-gpu-{os.getuid()}-{os.getpid()}.yaml"
    path.write_text(yaml.safe_dump(topology))
    return str(path)


def foreign_pod(name: str) -> client.V1Pod:
    """Another team's Pod, made outside the portal, asking for a GPU the old way."""
    container = client.V1Container(
        name="main",
        image="nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
        command=["sleep", "infinity"],
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}),
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[container], restart_policy="Never"),
    )


@pytest.fixture
def busy_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=KUBELET_SPEED, topology=_one_gpu_topology())
    yield handle
    handle.stop()


@pytest.fixture
def busy_cluster(transactional_db: None, busy_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(busy_kubesim, name="busy")
    gateways.forget_gateways()


def test_a_waiting_job_starts_by_itself_when_the_other_teams_pod_ends(
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    busy_kubesim: kubesim.Handle,
    busy_cluster: Cluster,
    celery_worker_process: Any,
) -> None:
    seeded_profile(BATCH)
    core = client.CoreV1Api(api_client(busy_kubesim))
    other_team = create_namespace(busy_kubesim, "other-team")
    core.create_namespaced_pod(other_team, foreign_pod("hog"))
    wait_until(lambda: core.read_namespaced_pod("hog", other_team).spec.node_name, timeout=30)
    claim = waiting_claim(alice, busy_cluster)

    base = live_server.url
    page = open_page()
    log_in(page, base, "alice", PASSWORD)
    start(
        page,
        base,
        claim,
        BATCH,
        image=TRAIN,
        command="train-sim",
        args="--steps 10 --step-seconds 2",
    )
    # Her job's page: it waits for the GPU, first in line, for what and why.
    spot = page.locator("#queue-position")
    expect(spot).to_contain_text(f"position 1 of 1 for {CLASS}", timeout=TO_RUN)
    # No Pod of hers asks the scheduler yet (the Job is suspended): the portal's own words,
    # naming the scheduler's claim for the other team's Pod.
    held = f"All 1 devices of class {CLASS} are held by 1 other claim"
    expect(page.locator("#queue-reason")).to_contain_text(held)
    by_pod = "1 of these is the scheduler's claim for a Pod that asked for nvidia.com/gpu."
    expect(page.locator("#queue-reason")).to_contain_text(by_pod)
    # Only another team's Pod holds the GPU: no expiry is known, so no time is promised.
    expect(page.locator("#queue-estimate")).to_have_text("estimate: unknown")
    workload = Workload.objects.get(claim=claim)
    assert workload.suspended
    screenshot(page, "queue-job-waiting")

    claim_page = open_page()
    log_in(claim_page, base, "alice", PASSWORD)
    claim_page.goto(base + reverse("claim", args=[claim.pk]))
    expect(claim_page.locator("#queue-position")).to_contain_text(f"position 1 of 1 for {CLASS}")
    expect(claim_page.locator("#queue-reason")).to_contain_text(by_pod)
    expect(claim_page.locator("#queue-estimate")).to_have_text("estimate: unknown")
    screenshot(claim_page, "queue-claim-waiting")

    # The other team's Pod ends: its GPU comes free, and her job starts by itself.
    core.delete_namespaced_pod("hog", other_team, grace_period_seconds=0)
    state = page.locator("#workload-state-title")
    expect(state).to_contain_text("running", timeout=TO_RUN)
    expect(spot).to_have_count(0)
    expect(page.locator("#workload-gpu")).to_contain_text("NVIDIA")
    expect(state).to_contain_text("succeeded", timeout=TO_RUN)
    assert_not_reloaded(page)
    screenshot(page, "queue-job-started")
    expect(claim_page.locator("#queue-position")).to_have_count(0, timeout=TO_RUN)
