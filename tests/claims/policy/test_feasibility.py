"""Per-node feasibility: kubesim's default cluster has 2 nodes with 4 H100 each (8 in all)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.policy import feasibility

CLASS = "gpu.nvidia.com"


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(
        user=alice, cluster=cluster, name=f"feas-{uuid.uuid4().hex[:6]}"
    )


def submit(user: User, ns: NamespaceRequest, **fields: Any) -> ClaimRequest:
    values = {"name": f"c-{uuid.uuid4().hex[:6]}", "device_class": CLASS, "count": 1} | fields
    return services.claim_request_submit(user=user, namespace_request=ns, **values)


def uuids_of(cluster: Cluster, node: str, how_many: int) -> list[str]:
    on_node = [d for d in cluster.inventory["devices"] if d["node"] == node]
    return [d["attributes"]["uuid"] for d in on_node[:how_many]]


def test_it_refuses_more_devices_than_one_node_has(
    alice: User, namespace: NamespaceRequest
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit(alice, namespace, count=5)

    assert refused.value.message_dict == {
        "count": [
            "At most 4 devices of class gpu.nvidia.com sit on one node; "
            "this cluster cannot give 5 to one claim."
        ]
    }
    assert submit(alice, namespace, count=4).state == "pending"


def test_it_counts_only_the_devices_the_selector_matches(
    alice: User, namespace: NamespaceRequest, cluster: Cluster
) -> None:
    chosen = uuids_of(cluster, "gpu-node-1", 2) + uuids_of(cluster, "gpu-node-2", 1)
    selector = f"device.attributes['gpu.nvidia.com'].uuid in {chosen!r}"

    with pytest.raises(ValidationError) as refused:
        submit(alice, namespace, count=3, selector=selector)

    assert refused.value.message_dict["count"] == [
        "At most 2 devices of class gpu.nvidia.com matching the selector sit on one node; "
        "this cluster cannot give 3 to one claim."
    ]
    claim = submit(alice, namespace, count=2, selector=selector)
    found = feasibility.of_claim(claim)
    assert (found.possible, found.matching, found.best_node) == (True, 3, "gpu-node-1")


def test_it_says_what_is_free_now(
    alice: User, namespace: NamespaceRequest, cluster: Cluster
) -> None:
    claim = submit(alice, namespace, count=3)
    held = [{"driver": CLASS, "pool": "gpu-node-1", "device": f"gpu-{i}"} for i in range(3)]
    ClaimRequest.objects.filter(pk=claim.pk).update(
        state="in_use", allocation={"node": "gpu-node-1", "devices": held}
    )

    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=2, selector="")

    assert (found.free_on_best_node, found.best_node, found.free_in_cluster) == (
        4,
        "gpu-node-2",
        5,
    )
    assert found.summary() == (
        "Can be satisfied: up to 4 devices of class gpu.nvidia.com on one node. "
        "Free now: 4 on gpu-node-2, 5 in the cluster."
    )


def test_it_counts_devices_published_for_every_node_on_each_node(cluster: Cluster) -> None:
    shared = {"node": None, "driver": CLASS, "pool": "fabric", "name": "gpu-shared"}
    devices = cluster.inventory["devices"]
    shared.update(attributes=devices[0]["attributes"], capacity={})
    cluster.inventory = {**cluster.inventory, "devices": [*devices, shared]}

    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=5, selector="")

    assert found.possible and found.max_on_one_node == 5


def test_a_selector_it_cannot_evaluate_is_never_counted_as_a_match(cluster: Cluster) -> None:
    """The driver (v25.8 and later) publishes no `index`: on a real cluster the scheduler stops
    the allocation with a CEL runtime error, so the preview promises nothing."""
    selector = "device.attributes['gpu.nvidia.com'].index == 1.0"

    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=1, selector=selector)

    assert not found.selector_evaluated and found.possible is None
    assert (found.matching, found.unevaluated, found.of_class) == (0, 8, 8)
    assert found.summary() == (
        "Cannot be checked before the cluster tries it: the selector fails to evaluate on 8 "
        "of 8 devices of class gpu.nvidia.com (an attribute they do not publish, or a "
        "comparison CEL cannot make); the scheduler stops the allocation on such a device "
        "with a CEL runtime error."
    )
    assert found.line().startswith("The selector fails to evaluate on 8 of 8 devices")
    assert "Can be satisfied" not in found.summary() and found.count_problem() is None
    assert found.as_dict()["possible"] is None


def test_devices_it_fails_on_are_not_counted_where_others_are_evaluated(cluster: Cluster) -> None:
    devices = [dict(d) for d in cluster.inventory["devices"]]
    for number, device in enumerate(devices[:3]):  # as driver v25.3 published them
        device["attributes"] = {**device["attributes"], "index": number}
    cluster.inventory = {**cluster.inventory, "devices": devices}
    selector = "device.attributes['gpu.nvidia.com'].index >= 1.0"

    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=1, selector=selector)

    assert (found.matching, found.unevaluated, found.of_class) == (2, 5, 8)
    assert found.possible is None and not found.selector_evaluated
    assert found.summary().startswith("Cannot be checked before the cluster tries it:")


def test_a_mixed_int_and_double_comparison_is_evaluated_as_kubernetes_does(
    cluster: Cluster,
) -> None:
    devices = [dict(d) for d in cluster.inventory["devices"]]
    for number, device in enumerate(devices):
        device["attributes"] = {**device["attributes"], "index": number % 4}
    cluster.inventory = {**cluster.inventory, "devices": devices}
    selector = "device.attributes['gpu.nvidia.com'].index == 1.0"

    found = feasibility.assess(cluster=cluster, device_class=CLASS, count=1, selector=selector)

    assert found.selector_evaluated and found.possible
    assert (found.matching, found.max_on_one_node) == (2, 1)


def test_it_shows_the_approver_whether_a_claim_can_be_met(
    alice: User, carol: User, namespace: NamespaceRequest, client: Client
) -> None:
    claim = submit(alice, namespace, count=3)
    client.force_login(carol)

    page = client.get(reverse("approvals")).content.decode()

    assert f'id="claim-feasibility-{claim.pk}"' in page
    assert "Can be satisfied: up to 4 devices of class gpu.nvidia.com on one node." in page
    assert "Free now: 4 on gpu-node-" in page


def test_the_approver_sees_one_feasibility_statement_per_pending_claim(
    alice: User, carol: User, namespace: NamespaceRequest, client: Client
) -> None:
    """The queue said it twice in different words (a summary under the devices and the
    picker's line by the decision); it now says what the claim form says, once."""
    claim = submit(alice, namespace, count=3, gpu_model="NVIDIA H100 80GB HBM3")
    client.force_login(carol)

    page = client.get(reverse("approvals")).content.decode()

    assert page.count(f'id="claim-feasibility-{claim.pk}"') == 1
    assert "feasibility-line-" not in page
    assert "Can be satisfied: up to 4 devices of class gpu.nvidia.com matching the selector" in page
    assert "Free now: 4 on gpu-node-1" in page


def test_it_shows_feasibility_in_the_form_preview(
    alice: User, namespace: NamespaceRequest, client: Client
) -> None:
    client.force_login(alice)
    form = {"namespace_request": namespace.pk, "name": "big", "device_class": CLASS, "count": 6}

    preview = client.post(reverse("claim-preview"), form).content.decode()
    submitted = client.post(reverse("claim-request"), form).content.decode()

    refusal = (
        "At most 4 devices of class gpu.nvidia.com sit on one node; "
        "this cluster cannot give 6 to one claim."
    )
    assert "Cannot be satisfied with this count: up to 4 devices of class gpu.nvidia.com" in (
        preview
    )
    assert refusal in preview
    assert refusal in submitted


def test_it_assesses_each_alternative_and_finds_the_first_that_fits_now(
    alice: User, namespace: NamespaceRequest, cluster: Cluster
) -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    a100 = "NVIDIA A100-SXM4-40GB"
    claim = submit(
        alice,
        namespace,
        count=2,
        gpu_model=h100,
        alternatives=[
            {"device_class": CLASS, "gpu_model": a100, "count": 2},
            {"device_class": CLASS, "count": 1},
        ],
    )
    found = feasibility.of_alternatives(claim)
    assert [(f.matching, f.best_node) for f in found] == [
        (4, "gpu-node-1"),
        (4, "gpu-node-2"),
        (8, "gpu-node-1"),
    ]
    assert feasibility.first_fitting(found) == 1

    node_1 = [d for d in cluster.inventory["devices"] if d["node"] == "gpu-node-1"]
    held = [
        {"request": "gpu", "driver": d["driver"], "pool": d["pool"], "device": d["name"]}
        for d in node_1[:3]
    ]
    ClaimRequest.objects.filter(pk=claim.pk).update(allocation={"devices": held})
    second = [{"device_class": CLASS, "gpu_model": a100, "count": 2}]
    other = submit(alice, namespace, count=2, gpu_model=h100, alternatives=second)
    found = feasibility.of_alternatives(other)
    assert [f.fits_now for f in found] == [False, True]
    assert feasibility.first_fitting(found) == 2
