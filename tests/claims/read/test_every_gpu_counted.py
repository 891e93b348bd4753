"""Every GPU counted (issue 25): a Pod that asked for `nvidia.com/gpu: 1` the device-plugin way
holds a GPU through the claim the scheduler made for it, and tainted devices (the driver's
taint in a ResourceSlice, a DeviceTaintRule) are not free either.

kubesim/cluster/topologies/busy-example.yaml: on gpu-node-1 another team's claim holds 2 of 4
H100s; on gpu-node-2 the `jupyter/notebook` Pod's scheduler-made claim holds 1 A100 and gpu-3
carries `gpu.nvidia.com/xid=79:NoSchedule`. Here a DeviceTaintRule also taints gpu-node-1's
gpu-3 (NoExecute), so 1 H100 and 2 A100s are free.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.models import Cluster, NamespaceRequest, Team
from claims.policy import feasibility, quota
from claims.read import inventory
from claims.worker import cluster_loop
from kubesim.cluster.topology import DEFAULT_PATH
from tests.fixtures.kubesim import raw_request
from tests.fixtures.portal import make_user, register_cluster, wait_until

BUSY_TOPOLOGY = str(DEFAULT_PATH.parent / "busy-example.yaml")
CLASS = "gpu.nvidia.com"
RULES = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"
MAINTENANCE = {
    "apiVersion": "resource.k8s.io/v1alpha3",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "node-1-gpu-3"},
    "spec": {
        "deviceSelector": {"driver": CLASS, "pool": "gpu-node-1", "device": "gpu-3"},
        "taint": {"key": "example.com/maintenance", "value": "fan", "effect": "NoExecute"},
    },
}
SERVED = ("v1", "v1beta2", "v1beta1", "v1alpha3")


@pytest.fixture(scope="module")
def busy_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=20, topology=BUSY_TOPOLOGY, served_versions=SERVED)
    created = raw_request(handle, "POST", RULES, MAINTENANCE)
    assert created.status == 201, created.body
    yield handle
    handle.stop()


@pytest.fixture
def busy(db: None, busy_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(busy_kubesim, name="busy")
    gateways.forget_gateways()


@pytest.fixture
def admin(db: None) -> User:
    user = make_user("admin")
    User.objects.filter(pk=user.pk).update(is_staff=True)
    user.refresh_from_db()
    return user


def page(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def text_of(content: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", content))


def test_the_inventory_records_the_pod_that_asked_for_nvidia_com_gpu(busy: Cluster) -> None:
    rows = [row for row in busy.inventory["held_outside"] if row["kind"] == "Pod"]

    assert [(r["pool"], r["namespace"], r["name"], r["device_classes"]) for r in rows] == [
        ("gpu-node-2", "jupyter", "notebook", [CLASS])
    ]
    assert inventory.requested_as(busy.inventory, rows[0]["device_classes"]) == "nvidia.com/gpu"


def test_the_inventory_records_the_taints_of_slices_and_rules(busy: Cluster) -> None:
    assert inventory.tainted_ids(busy.inventory) == {
        (CLASS, "gpu-node-1", "gpu-3"),
        (CLASS, "gpu-node-2", "gpu-3"),
    }
    by_device = {(d["pool"], d["name"]): d["taints"] for d in busy.inventory["devices"]}
    (rule_taint,) = by_device[("gpu-node-1", "gpu-3")]
    assert (rule_taint["key"], rule_taint["value"], rule_taint["effect"]) == (
        "example.com/maintenance",
        "fan",
        "NoExecute",
    )
    assert rule_taint["timeAdded"]


def test_free_counts_leave_out_extended_resource_claims_and_tainted_devices(busy: Cluster) -> None:
    found = feasibility.assess(cluster=busy, device_class=CLASS, count=1, selector="")

    assert (found.free_in_cluster, found.free_on_best_node, found.best_node) == (
        3,
        2,
        "gpu-node-2",
    )
    assert (found.held_outside, found.tainted) == (3, 2)
    assert found.summary().endswith(
        "Free now: 2 on gpu-node-2, 3 in the cluster. "
        "2 matching devices are tainted and not given to new claims. "
        "3 matching devices are held outside the portal."
    )


def test_a_claim_for_two_h100s_does_not_fit_now(busy: Cluster) -> None:
    found = feasibility.assess(
        cluster=busy,
        device_class=CLASS,
        count=2,
        selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    )

    assert (found.possible, found.fits_now, found.free_in_cluster) == (True, False, 1)


def test_a_data_scientist_sees_a_pod_held_gpu_and_tainted_ones_without_names(
    alice: User, busy: Cluster
) -> None:
    content = page(alice, reverse("cluster", args=[busy.pk]))
    words = text_of(content)

    assert "Node gpu-node-1 1 of 4 free" in words
    assert "Node gpu-node-2 2 of 4 free" in words
    assert "held outside the portal (requested as nvidia.com/gpu by a Pod)" in words
    assert "tainted, not free (gpu.nvidia.com/xid=79:NoSchedule since " in words
    assert "tainted, not free (example.com/maintenance=fan:NoExecute since " in words
    tile = re.search(r'id="tile-gpu-node-2-gpu-3"[^>]*>', content)
    assert tile is not None and 'data-state="tainted"' in tile.group(0)
    for name in ("jupyter", "notebook", "vision-research", "trainer"):
        assert name not in content


def test_an_admin_sees_which_pod_asked(admin: User, busy: Cluster) -> None:
    words = text_of(page(admin, reverse("cluster", args=[busy.pk])))

    assert "held outside the portal (requested as nvidia.com/gpu by Pod jupyter/notebook)" in words


@pytest.mark.django_db(transaction=True)
def test_the_cluster_loop_follows_device_taint_rules() -> None:
    own = kubesim.start(speed=50, topology=BUSY_TOPOLOGY, served_versions=SERVED)
    cluster = Cluster.objects.create(
        name="followed", kubeconfig_path=own.kubeconfig, context="", simulated=True
    )
    stop = threading.Event()
    loop = cluster_loop.ClusterLoop(cluster.pk, stop)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:

        def tainted() -> Any:
            return inventory.tainted_ids(Cluster.objects.get(pk=cluster.pk).inventory)

        wait_until(lambda: tainted() == {(CLASS, "gpu-node-2", "gpu-3")}, timeout=30)
        assert raw_request(own, "POST", RULES, MAINTENANCE).status == 201
        wait_until(lambda: (CLASS, "gpu-node-1", "gpu-3") in tainted(), timeout=30)
        assert raw_request(own, "DELETE", f"{RULES}/node-1-gpu-3").status == 200
        wait_until(lambda: tainted() == {(CLASS, "gpu-node-2", "gpu-3")}, timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)
        gateways.forget_gateways()
        own.stop()


def test_the_api_lists_a_device_with_its_taints(alice: User, busy: Cluster) -> None:
    client = Client()
    client.force_login(alice)

    url = reverse("api-cluster-devices", args=[busy.pk])
    devices = client.get(url, {"node": "gpu-node-2"}).json()

    taints = {d["name"]: [(t["key"], t["effect"]) for t in d["taints"]] for d in devices}
    assert taints["gpu-3"] == [("gpu.nvidia.com/xid", "NoSchedule")]
    assert taints["gpu-0"] == []


def test_a_teams_quota_counts_what_its_namespaces_hold_outside_the_portal(
    alice: User, busy: Cluster
) -> None:
    """A Pod's scheduler-made claim and a claim made by hand in the team's namespaces hold
    GPUs the team's quota lines count, as the namespace's ResourceQuota does."""
    team = Team.objects.create(name="notebooks")
    team.members.add(alice)
    assert quota.devices_held(team, busy, CLASS) == 0

    NamespaceRequest.objects.create(owner=alice, cluster=busy, name="jupyter", state="active")
    assert quota.devices_held(team, busy, CLASS) == 1  # the notebook Pod's nvidia.com/gpu

    NamespaceRequest.objects.create(
        owner=alice, cluster=busy, name="vision-research", state="active"
    )
    assert quota.devices_held(team, busy, CLASS) == 3  # and the trainer's claim of 2 H100s
    # Another team's user's namespaces are not this team's.
    other = Team.objects.create(name="others")
    assert quota.devices_held(other, busy, CLASS) == 0
