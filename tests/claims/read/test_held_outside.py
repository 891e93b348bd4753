"""GPUs held outside the portal (issue 23): on a shared cluster another team's claim, made
outside the portal, holds 2 of gpu-node-1's 4 H100s (kubesim/cluster/topologies/default.yaml).
The claim form's preview, the approval queue, the GPU map and the API count them as taken;
a data scientist sees "held outside the portal", never the other team's names."""

from __future__ import annotations

import html
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from claims.policy import feasibility
from claims.worker import cluster_loop
from tests.fixtures.kubesim import SHARED_TOPOLOGY
from tests.fixtures.portal import make_user, register_cluster, wait_until

H100 = "NVIDIA H100 80GB HBM3"
CLASS = "gpu.nvidia.com"
TRAINER_POD = "/api/v1/namespaces/vision-research/pods/trainer"


@pytest.fixture(scope="module")
def shared_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=20, topology=SHARED_TOPOLOGY)
    yield handle
    handle.stop()


@pytest.fixture
def shared(db: None, shared_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(shared_kubesim, name="shared")
    gateways.forget_gateways()


@pytest.fixture
def namespace(alice: User, shared: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(
        user=alice, cluster=shared, name=f"held-{uuid.uuid4().hex[:6]}"
    )


@pytest.fixture
def admin(db: None) -> User:
    user = make_user("admin")
    User.objects.filter(pk=user.pk).update(is_staff=True)
    user.refresh_from_db()
    return user


def page(user: User, url: str, data: dict[str, Any] | None = None) -> str:
    client = Client()
    client.force_login(user)
    response = client.post(url, data) if data is not None else client.get(url)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def text_of(content: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", content))


def test_the_inventory_records_what_claims_outside_the_portal_hold(shared: Cluster) -> None:
    assert shared.inventory["held_outside"] == [
        {"driver": CLASS, "pool": "gpu-node-1", "device": f"gpu-{i}", "kind": "ResourceClaim"}
        | {"namespace": "vision-research", "name": "trainer"}
        for i in (0, 1)
    ]


def test_free_counts_leave_out_devices_held_outside_the_portal(shared: Cluster) -> None:
    found = feasibility.assess(cluster=shared, device_class=CLASS, count=2, selector="")

    assert (found.free_on_best_node, found.best_node, found.free_in_cluster) == (
        4,
        "gpu-node-2",
        6,
    )
    assert found.held_outside == 2
    assert "claims made outside it are not seen" not in found.summary()
    assert found.summary().endswith(
        "Free now: 4 on gpu-node-2, 6 in the cluster. "
        "2 matching devices are held outside the portal."
    )


def test_the_preview_says_a_claim_does_not_fit_because_of_them(
    alice: User, namespace: NamespaceRequest
) -> None:
    data = {
        "namespace_request": namespace.pk,
        "name": "train",
        "device_class": CLASS,
        "gpu_model": H100,
        "count": 3,
        "selector": "",
        "submission_token": uuid.uuid4().hex,
    }

    content = page(alice, reverse("claim-preview"), data)

    line = re.search(r'id="feasibility-line"[^>]*>(.*?)</p>', content, re.S)
    assert line is not None
    assert line.group(1) == (
        "Can be satisfied: up to 4 devices of class gpu.nvidia.com matching the selector on "
        "one node. Free now: 2 on gpu-node-1, 2 in the cluster. 2 matching devices are held "
        "outside the portal. It does not fit now: devices held outside the portal leave too "
        "few free on any node; it waits until they are released."
    )


def test_the_approver_sees_it_before_approving(
    alice: User, carol: User, namespace: NamespaceRequest
) -> None:
    claim = services.claim_request_submit(
        user=alice,
        namespace_request=namespace,
        name=f"c-{uuid.uuid4().hex[:6]}",
        device_class=CLASS,
        gpu_model=H100,
        count=3,
    )

    content = page(carol, reverse("approvals"))

    line = re.search(rf'id="claim-feasibility-{claim.pk}"[^>]*>(.*?)</div>', content, re.S)
    assert line is not None
    assert "Free now: 2 on gpu-node-1, 2 in the cluster." in line.group(1)
    assert "It does not fit now: devices held outside the portal" in line.group(1)


def test_the_api_counts_them(alice: User, namespace: NamespaceRequest) -> None:
    claim = services.claim_request_submit(
        user=alice,
        namespace_request=namespace,
        name=f"c-{uuid.uuid4().hex[:6]}",
        device_class=CLASS,
        gpu_model=H100,
        count=1,
    )
    client = Client()
    client.force_login(alice)

    found = client.get(reverse("api-claim", args=[claim.pk])).json()["feasibility"]

    assert (found["free_now_in_cluster"], found["held_outside_portal"]) == (2, 2)


def test_a_data_scientist_sees_held_outside_the_portal_and_no_names(
    alice: User, shared: Cluster
) -> None:
    content = page(alice, reverse("cluster", args=[shared.pk]))
    words = text_of(content)

    assert "Node gpu-node-1 2 of 4 free" in words
    assert words.count("held outside the portal") >= 3  # the legend and both devices
    tile = re.search(r'id="tile-gpu-node-1-gpu-0"[^>]*>', content)
    assert tile is not None and 'data-state="outside"' in tile.group(0)
    assert "vision-research" not in content and "trainer" not in content


def test_an_admin_sees_whose_claim_it_is(admin: User, shared: Cluster) -> None:
    content = page(admin, reverse("cluster", args=[shared.pk]))

    assert "held outside the portal (claim vision-research/trainer)" in text_of(content)


@pytest.mark.django_db(transaction=True)
def test_the_cluster_loop_follows_what_they_hold() -> None:
    own = kubesim.start(speed=50, topology=SHARED_TOPOLOGY)  # its workload is deleted here
    cluster = Cluster.objects.create(
        name="followed", kubeconfig_path=own.kubeconfig, context="", simulated=True
    )
    stop = threading.Event()
    loop = cluster_loop.ClusterLoop(cluster.pk, stop)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:

        def held() -> list[str]:
            inventory = Cluster.objects.get(pk=cluster.pk).inventory
            return [row["device"] for row in inventory.get("held_outside", [])]

        wait_until(lambda: held() == ["gpu-0", "gpu-1"], timeout=30)
        own.admin("DELETE", TRAINER_POD)
        wait_until(lambda: held() == [], timeout=30)  # the Pod ended: its claim freed them
    finally:
        stop.set()
        thread.join(timeout=30)
        gateways.forget_gateways()
        own.stop()
