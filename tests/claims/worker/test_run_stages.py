"""A run says where its Pod is between created and running, as a real cluster shows it: bound
to a node, pulling the image (the kubelet's own words), or unable to pull it. kubesim's
kubelet pulls as a node does (time per image, ErrImagePull then ImagePullBackOff)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.models import Cluster, VerificationRun
from claims.worker import sync
from tests.claims.policy.test_run_limits import pod_of, started_run, unpullable_pod_waiting
from tests.fixtures.kubesim import wait_until
from tests.fixtures.portal import register_cluster

VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEVICE_QUERY = "nvcr.io/nvidia/k8s/cuda-sample:devicequery"


@pytest.fixture(scope="module")
def slow_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubesim.Handle]:
    """A cluster whose registry takes for ever to send the vectorAdd image (tens of seconds
    on a real node for a CUDA image; here it does not end while the test looks)."""
    topology = {
        "images": [{"image": VECTOR_ADD, "pull_seconds": 10**6}, DEVICE_QUERY],
        "nodes": [{"name": "gpu-node-1", "gpus": [{"model": "H100-80GB-HBM3", "count": 2}]}],
    }
    path: Path = tmp_path_factory.mktemp("topology") / "slow-registry.yaml"
    path.write_text(yaml.safe_dump(topology))
    handle = kubesim.start(topology=str(path), speed=20)
    yield handle
    handle.stop()


@pytest.fixture
def slow_cluster(db: None, slow_registry: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(slow_registry, name="slow-registry")
    gateways.forget_gateways()


def pulling(handle: kubesim.Handle, run: VerificationRun) -> bool:
    path = f"/api/v1/namespaces/{run.claim.namespace}/events"
    events = handle.admin("GET", path)["items"]
    return any(
        e["involvedObject"]["name"] == run.pod_name and e["reason"] == "Pulling" for e in events
    )


def api_run(user: User, run: VerificationRun) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    return client.get(f"/api/v1/runs/{run.pk}/").json()


def test_a_run_whose_bound_pod_pulls_its_image_says_pulling_not_waiting_to_schedule(
    alice: User, slow_cluster: Cluster, slow_registry: kubesim.Handle, client: Client
) -> None:
    run = started_run(alice, slow_cluster)
    wait_until(lambda: pulling(slow_registry, run), timeout=15)
    assert pod_of(slow_registry, run)["status"]["phase"] == "Pending"
    sync.sync_cluster(slow_cluster)
    run.refresh_from_db()
    assert (run.state, run.pod_stage, run.node) == ("pending", "pulling", "gpu-node-1")
    assert run.state_message == (
        f'Bound to node gpu-node-1; pulling the image: Pulling image "{VECTOR_ADD}"'
    )
    assert api_run(alice, run)["pod_stage"] == "pulling"
    client.force_login(alice)
    said = "Bound to node gpu-node-1; pulling the image: Pulling image &quot;nvcr.io/"
    run_page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert re.search(f'id="run-message">{said}', run_page)
    claim_page = client.get(reverse("claim", args=[run.claim_id])).content.decode()
    assert re.search(f'id="run-{run.pk}-message">{said}', claim_page)


@override_settings(VECTOR_ADD_IMAGE="nvcr.io/nvidia/k8s/cuda-sample:no-such-tag")
def test_a_run_whose_image_does_not_exist_says_it_cannot_be_pulled(
    alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle, client: Client
) -> None:
    run = started_run(alice, cluster)
    wait_until(lambda: unpullable_pod_waiting(kubesim_cluster, run), timeout=15)
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert (run.state, run.pod_stage) == ("pending", "image_pull_failed")
    image = "nvcr.io/nvidia/k8s/cuda-sample:no-such-tag"
    assert run.state_message.startswith(
        f"Bound to node {run.node}; the image cannot be pulled: ctr0: ErrImagePull "
        f'(rpc error: code = NotFound desc = failed to pull and unpack image "{image}"'
    )
    assert api_run(alice, run)["pod_stage"] == "image_pull_failed"
    client.force_login(alice)
    text = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "the image cannot be pulled: ctr0: ErrImagePull" in text
