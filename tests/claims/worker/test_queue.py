"""The queue when the cluster is busy (issue 25.3), against kubesim: another team's Pods, made
outside the portal, hold every GPU (`nvidia.com/gpu: 4` on each node, through the claims the
scheduler makes for them). Claims that wait show their position, the scheduler's words and an
estimate that is never a guess; an approver moves one up, with the reason on its trail; Jobs of
claims that do not fit are created suspended and resumed in queue order when a GPU frees up."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kubernetes import client

import kubesim
from claims.clusters import gateways
from claims.domain import services, state_messages
from claims.domain.transitions import transition
from claims.models import AuditEvent, ClaimRequest, Cluster, VerificationRun, Workload
from claims.read import queue
from claims.worker import cluster_steps, queue_steps, sync, workload_steps
from tests.fixtures.kubesim import QUIET_TOPOLOGY, api_client, create_namespace
from tests.fixtures.portal import register_cluster, wait_until
from tests.fixtures.workloads import BATCH, seeded_profile

IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
CLASS = "gpu.nvidia.com"
HELD = f"All 8 devices of class {CLASS} are held by 2 other claims."
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs/{name}"


@pytest.fixture
def full_kubesim() -> Iterator[kubesim.Handle]:
    """A quiet cluster whose 8 GPUs another team's two Pods hold, 4 on each node."""
    handle = kubesim.start(speed=20, topology=QUIET_TOPOLOGY)
    namespace = create_namespace(handle, "other-team")
    core = client.CoreV1Api(api_client(handle))
    for name in ("hog-1", "hog-2"):
        core.create_namespaced_pod(namespace, hog(name))
    wait_until(lambda: all(scheduled(core, namespace, n) for n in ("hog-1", "hog-2")), 30)
    handle.hog_namespace = namespace  # type: ignore[attr-defined]
    yield handle
    handle.stop()


@pytest.fixture
def full(db: None, full_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(full_kubesim, name="full")
    gateways.forget_gateways()


def hog(name: str) -> client.V1Pod:
    container = client.V1Container(
        name="cuda",
        image=IMAGE,
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "4"}),
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[container], restart_policy="Never"),
    )


def scheduled(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    return bool(core.read_namespaced_pod(name, namespace).spec.node_name)


def waiting_claim(user: User, cluster: Cluster, name: str, count: int = 1) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"q-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=user, namespace_request=ns, name=name, device_class=CLASS, count=count
    )
    transition(ns, to="approved", allowed=("pending",))
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim = ClaimRequest.objects.get(pk=claim.pk)
    assert claim.state == "waiting", claim.state_message
    return claim


def page_text(user: User, url: str) -> str:
    web = Client()
    web.force_login(user)
    response = web.get(url)
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


def spots(cluster: Cluster) -> dict[int, queue.Spot]:
    return queue.queue_of(Cluster.objects.get(pk=cluster.pk))


def test_two_waiting_claims_show_their_place_and_an_approver_moves_one_up(
    alice: User, carol: User, full: Cluster
) -> None:
    first = waiting_claim(alice, full, "first")
    second = waiting_claim(alice, full, "second")
    for claim in (first, second):
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(VerificationRun.objects.get(pk=run.pk))

    # Neither fits now: their runs' Pods wait to be created, in queue order.
    for claim in (first, second):
        run = claim.runs.get()
        assert (run.state, run.pod_uid) == ("queued", ""), run.state_message
        assert run.state_message == state_messages.WAITS_ITS_TURN
    found = spots(full)
    assert len(found) == 2 and all(HELD in s.reason for s in found.values())
    by_pods = "2 of these are the scheduler's claims for Pods that asked for nvidia.com/gpu."
    assert all(by_pods in s.reason for s in found.values())
    assert [(found[c.pk].position, found[c.pk].of) for c in (first, second)] == [(1, 2), (2, 2)]
    assert found[first.pk].what == CLASS
    # Only other teams' Pods hold the GPUs: no expiry is known, so no time is promised.
    assert str(found[first.pk].estimate) == "unknown"
    assert not found[first.pk].fits_now

    claim_page = page_text(alice, reverse("claim", args=[second.pk]))
    assert f"Waiting for a GPU : position 2 of 2 for {CLASS}" in claim_page
    assert HELD in claim_page
    assert "estimate: unknown" in claim_page
    assert f"2 waiting for {CLASS} on full" in page_text(alice, reverse("dashboard"))
    assert f"2 waiting for {CLASS} on full" in page_text(carol, reverse("approvals"))
    api = Client()
    api.force_login(alice)
    read = api.get(reverse("api-claim", args=[second.pk])).json()
    assert read["queue"]["position"] == 2
    assert read["queue"]["of"] == 2
    assert read["queue"]["estimate"] == "unknown"
    assert read["queue"]["estimate_at"] is None
    assert HELD in read["queue"]["reason"]

    # Only an approver moves a claim, and only with a reason.
    refused = api.post(
        reverse("api-claim-queue", args=[second.pk]),
        {"direction": "up", "reason": "mine"},
        content_type="application/json",
    )
    assert refused.status_code == 403
    approver = Client()
    approver.force_login(carol)
    url = reverse("api-claim-queue", args=[second.pk])
    no_reason = approver.post(url, {"direction": "up"}, content_type="application/json")
    assert no_reason.status_code == 400
    assert list(no_reason.json()) == ["reason"]
    moved = approver.post(
        url, {"direction": "up", "reason": "Paper deadline"}, content_type="application/json"
    )
    assert moved.status_code == 200, moved.content
    assert moved.json()["queue"]["position"] == 1
    found = spots(full)
    assert [found[c.pk].position for c in (second, first)] == [1, 2]
    event = AuditEvent.objects.get(action="queue_moved", object_id=second.pk)
    assert event.actor == carol
    assert "Paper deadline" in event.message


def test_suspended_jobs_start_in_queue_order_when_a_gpu_frees_up(
    alice: User, carol: User, full: Cluster, full_kubesim: kubesim.Handle
) -> None:
    # Each wants a whole node's 4 GPUs: the node the first hog frees fits the head only.
    older = waiting_claim(alice, full, "older", count=4)
    newer = waiting_claim(alice, full, "newer", count=4)
    jobs = {}
    for claim in (older, newer):
        workload = services.workload_start(
            user=alice, claim_request=claim, profile=seeded_profile(BATCH)
        )
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
        jobs[claim.pk] = Workload.objects.get(pk=workload.pk)
        assert jobs[claim.pk].state == "started", jobs[claim.pk].state_message
        assert jobs[claim.pk].suspended

    def job(claim: ClaimRequest) -> dict[str, Any]:
        path = JOBS.format(ns=claim.namespace, name=jobs[claim.pk].name)
        return full_kubesim.admin("GET", path)

    assert all(job(claim)["spec"]["suspend"] is True for claim in (older, newer))
    found = spots(full)
    assert [found[c.pk].position for c in (older, newer)] == [1, 2]
    workload_page = page_text(alice, reverse("workload", args=[jobs[newer.pk].pk]))
    assert f"Waiting for a GPU : position 2 of 2 for {CLASS}" in workload_page
    assert "estimate: unknown" in workload_page
    # The approver's buttons on the claim page: a reason is needed, then it moves up.
    web = Client()
    web.force_login(carol)
    move = reverse("claim-queue-move", args=[newer.pk])
    refused = web.post(move, {"direction": "up", "reason": " "}, follow=True)
    assert "Say why" in html.unescape(refused.content.decode())
    assert ClaimRequest.objects.get(pk=newer.pk).queue_priority == 0
    moved = web.post(move, {"direction": "up", "reason": "Paper deadline"}, follow=True)
    assert "Moved in the queue." in moved.content.decode()
    assert "position 1 of 2" in page_text(carol, reverse("claim", args=[newer.pk]))
    # Nothing frees up: nothing starts.
    assert queue_steps.start_waiting(full) == []
    assert job(newer)["spec"]["suspend"] is True

    core = client.CoreV1Api(api_client(full_kubesim))
    namespace = full_kubesim.hog_namespace  # type: ignore[attr-defined]
    core.delete_namespaced_pod("hog-1", namespace, grace_period_seconds=0)

    def head_resumed() -> bool:
        sync.refresh_inventory(full)
        queue_steps.start_waiting(Cluster.objects.get(pk=full.pk))
        return not Workload.objects.get(pk=jobs[newer.pk].pk).suspended

    wait_until(head_resumed, timeout=30)
    assert job(newer)["spec"]["suspend"] is False
    # The one behind waits until the head has its devices.
    assert Workload.objects.get(pk=jobs[older.pk].pk).suspended
    assert job(older)["spec"]["suspend"] is True

    def head_allocated() -> bool:
        sync.sync_cluster(Cluster.objects.get(pk=full.pk))
        return ClaimRequest.objects.get(pk=newer.pk).allocation is not None

    wait_until(head_allocated, timeout=30)
    assert Workload.objects.get(pk=jobs[older.pk].pk).suspended  # no node has 4 free
    core.delete_namespaced_pod("hog-2", namespace, grace_period_seconds=0)

    def next_resumed() -> bool:
        sync.refresh_inventory(full)
        queue_steps.start_waiting(Cluster.objects.get(pk=full.pk))
        return not Workload.objects.get(pk=jobs[older.pk].pk).suspended

    wait_until(next_resumed, timeout=30)
    assert job(older)["spec"]["suspend"] is False


def test_claims_that_all_fit_start_together_in_queue_order(
    alice: User, full: Cluster, full_kubesim: kubesim.Handle
) -> None:
    """As Kueue's StrictFIFO admits: not one head at a time, every claim in order while the
    devices freed fit it once those ahead have theirs."""
    claims = [waiting_claim(alice, full, f"small-{n}") for n in range(3)]
    jobs = []
    for claim in claims:
        workload = services.workload_start(
            user=alice, claim_request=claim, profile=seeded_profile(BATCH)
        )
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
        jobs.append(Workload.objects.get(pk=workload.pk))
    assert all(job.suspended for job in jobs)
    core = client.CoreV1Api(api_client(full_kubesim))
    core.delete_namespaced_pod("hog-1", full_kubesim.hog_namespace, grace_period_seconds=0)  # type: ignore[attr-defined]

    def all_resumed() -> bool:
        sync.refresh_inventory(full)
        queue_steps.start_waiting(Cluster.objects.get(pk=full.pk))
        return not any(Workload.objects.get(pk=job.pk).suspended for job in jobs)

    wait_until(all_resumed, timeout=30)  # 4 GPUs freed on one node: room for all three


def test_a_claim_behind_a_head_that_does_not_fit_waits_though_it_would_fit(
    full: Cluster,
) -> None:
    """StrictFIFO: nothing passes a head that does not fit, whatever fits behind it."""
    inventory = full.inventory
    first_node = [d for d in inventory["devices"] if (d.get("node") or d["pool"]) == "gpu-node-1"]
    held = [
        gpu_map_hold([(d["driver"], d["pool"], d["name"]) for d in first_node[:3]], claim_id=-1)
    ]
    big, small = (
        ClaimRequest(pk=101, device_class=CLASS, count=4),
        ClaimRequest(pk=102, device_class=CLASS, count=1),
    )
    # Node 1 has 1 free, node 2 none (the quiet cluster's 8 GPUs, 4 per node; hog-2 holds
    # node 2's): the head wants 4, so the 1 free GPU that would fit the next is not taken.
    held += [gpu_map_hold(_devices_on(inventory, "gpu-node-2"), claim_id=-2)]
    assert queue.admitted_in_order(inventory, [big, small], held) == set()
    assert queue.admitted_in_order(inventory, [small, big], held) == {102}


def gpu_map_hold(devices: list[Any], claim_id: int) -> Any:
    return queue.gpu_map.Hold(
        claim_id=claim_id, claim_name="", namespace="", owner="", devices=frozenset(devices)
    )


def _devices_on(inventory: dict[str, Any], node: str) -> list[Any]:
    return [
        (d["driver"], d["pool"], d["name"])
        for d in inventory["devices"]
        if (d.get("node") or d["pool"]) == node
    ]


def test_the_estimate_is_the_earliest_expiry_that_frees_enough_devices(full: Cluster) -> None:
    inventory = full.inventory
    by_node: dict[str, list[Any]] = {}
    for device in inventory["devices"]:
        node = device.get("node") or device["pool"]
        by_node.setdefault(node, []).append((device["driver"], device["pool"], device["name"]))
    soon = timezone.now() + timedelta(hours=2)
    held = [
        queue.Held(frozenset(by_node["gpu-node-1"]), soon, 1),
        queue.Held(frozenset(by_node["gpu-node-2"]), None, -1),
    ]
    asked = queue.why_pending.Asked(device_class=CLASS, count=1, selector="")

    found = queue.estimate(inventory, asked, [], held)
    assert (found.at, found.node) == (soon, "gpu-node-1")
    assert str(found).endswith("at the latest, when a claim on gpu-node-1 expires")
    # With 4 ahead of it, node-1's 4 do not do: nothing is known.
    assert str(queue.estimate(inventory, asked, [4], held)) == "unknown"
