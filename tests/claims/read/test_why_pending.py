"""Why a claim or run waits, from what kubesim's scheduler, kubelet and quota admission say
and what its ResourceSlices publish (the topology of test_gpu_map: 2 H100s on gpu-node-1,
MIG devices and a whole A100 on mig-node-1)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.read import selectors, why_pending
from claims.read.gpu_map import Hold
from claims.web.views.clusters import claim_map_context, holds, reasons_for, run_pending_context
from claims.worker import cluster_steps, sync
from tests.claims.read.test_gpu_map import *  # noqa: F403 (fixtures)
from tests.claims.read.test_gpu_map import (
    H100_ONLY,
    NO_SUCH_IMAGE,
    TOPOLOGY,
    applied_claim,
    held_by_a_stuck_pod,
    started_run,
)
from tests.fixtures.portal import register_cluster, wait_until

GPU = "gpu.nvidia.com"
# kubesim's scheduler, for a Pod whose nodeSelector no node has (tests/kubesim/test_scheduler).
AFFINITY = (
    "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def asked(count: int | None = 1, selector: str = "", device_class: str = GPU) -> Any:
    return why_pending.Asked(device_class=device_class, count=count, selector=selector)


def kinds(reasons: list[why_pending.Reason]) -> list[str]:
    return [reason.kind for reason in reasons]


def taken_behind_the_queues_back(
    handle: kubesim.Handle, user: User, ns: NamespaceRequest, **fields: Any
) -> ClaimRequest:
    """held_by_a_stuck_pod, with no sync since: the cluster allocated its devices, the portal
    does not know yet. A run started meanwhile on a claim the queue sees as free goes to the
    scheduler, which cannot allocate it (the race no queue sees): how its words are read."""
    claim = applied_claim(user, ns, **fields)
    with override_settings(VECTOR_ADD_IMAGE=NO_SUCH_IMAGE, DEVICE_QUERY_IMAGE=NO_SUCH_IMAGE):
        started_run(user, claim)
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns.name}/resourceclaims/{claim.name}"
    wait_until(lambda: (handle.admin("GET", path).get("status") or {}).get("allocation"), 15)
    return claim


def scheduler_said(run: VerificationRun, cluster: Cluster, words: str) -> None:
    def said() -> bool:
        sync.sync_cluster(cluster)
        run.refresh_from_db()
        return words in run.state_message

    wait_until(said, timeout=15)


def test_it_says_when_all_matching_devices_are_held_and_by_how_many_claims(
    alice: User, bob: User, map_cluster: Cluster, namespace_of: Any, map_kubesim: Any
) -> None:
    held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    waiting = applied_claim(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    taken_behind_the_queues_back(map_kubesim, bob, namespace_of(bob), count=1, selector=H100_ONLY)
    run = started_run(alice, waiting)
    scheduler_said(run, map_cluster, "cannot allocate all claims")

    [reason] = reasons_for(waiting, holds(map_cluster, alice), run.state_message)

    assert reason.kind == "held" and reason.show_matching
    assert reason.text.startswith(
        "All 2 devices of class gpu.nvidia.com and matching your selector are held by 2 "
        "other claims. At most 0 are free on one node; you need 1."
    )
    assert reason.cluster_says == run.state_message
    assert reason.cluster_says.startswith("0/2 nodes are available: 2 cannot allocate all claims")
    assert kinds(run_pending_context(run, alice)["pending_reasons"]) == ["held"]
    claim_page = claim_map_context(waiting, alice)
    assert claim_page["claim_map"] is None
    assert kinds(claim_page["pending_reasons"]) == ["held"]


def test_it_says_when_no_device_matches_with_the_schedulers_words(
    alice: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    # The portal refuses such a claim when it is asked for; this one predates the GPU's
    # removal (so the cluster is the one to say it cannot be met).
    claim = services.claim_request_submit(
        user=alice, namespace_request=namespace_of(alice), name="gone", device_class=GPU, count=1
    )
    transition(claim, to="approved", allowed=("pending",))
    no_such = "device.attributes['gpu.nvidia.com'].productName == 'No Such GPU'"
    ClaimRequest.objects.filter(pk=claim.pk).update(selector=no_such)
    claim.refresh_from_db()
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    run = started_run(alice, claim)
    scheduler_said(run, map_cluster, "nodes are available")

    [reason] = run_pending_context(run, alice)["pending_reasons"]

    assert reason.kind == "no_match"
    assert reason.text == (
        "No device on this cluster is of class gpu.nvidia.com and matching your selector."
    )
    assert "nodes are available" in reason.cluster_says


def test_it_says_when_the_image_does_not_pull(
    alice: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    [run] = claim.runs.all()

    def pull_failed() -> bool:
        sync.sync_cluster(map_cluster)
        run.refresh_from_db()
        return "ErrImagePull" in run.state_message

    wait_until(pull_failed, timeout=15)

    assert run.state == "pending"
    assert run.state_message.startswith(
        f"Bound to node {run.node}; the image cannot be pulled: ctr0: ErrImagePull ("
    )
    [reason] = run_pending_context(run, alice)["pending_reasons"]
    assert reason.kind == "image"
    assert reason.text == "The container image could not be pulled, so the Pod cannot start."
    assert reason.cluster_says == run.state_message


def test_it_keeps_one_wording_through_the_pull_back_off(
    alice: User, map_cluster: Cluster, namespace_of: Any, map_kubesim: Any
) -> None:
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    [run] = claim.runs.all()
    path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}"

    def container_waits_for(reason: str) -> bool:
        statuses = map_kubesim.admin("GET", path)["status"].get("containerStatuses") or []
        waiting = [(s.get("state") or {}).get("waiting") or {} for s in statuses]
        if not any(state.get("reason") == reason for state in waiting):
            return False
        sync.sync_cluster(map_cluster)
        return True

    wait_until(lambda: container_waits_for("ErrImagePull"), timeout=20)
    wait_until(lambda: container_waits_for("ImagePullBackOff"), timeout=20)
    run.refresh_from_db()

    assert run.state_message.startswith(
        f"Bound to node {run.node}; the image cannot be pulled: ctr0: ErrImagePull ("
    )
    assert "Back-off" not in run.state_message
    trail = selectors.events_for(run).values_list("message", flat=True)
    assert len([message for message in trail if "ErrImagePull" in message]) == 1


def test_it_says_when_a_quota_refused_the_claim(
    alice: User, map_cluster: Cluster, namespace_of: Any, map_kubesim: Any
) -> None:
    ns = namespace_of(alice)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus"},
        "spec": {"hard": {f"{GPU}.deviceclass.resource.k8s.io/devices": "1"}},
    }
    map_kubesim.admin("POST", f"/api/v1/namespaces/{ns.name}/resourcequotas", quota)
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="too-big", device_class=GPU, count=2
    )
    transition(claim, to="approved", allowed=("pending",))

    def refused() -> bool:
        cluster_steps.apply_claim(claim)
        claim.refresh_from_db()
        return claim.state == "failed"

    wait_until(refused, timeout=15)

    assert "exceeded quota: gpus" in claim.state_message
    [reason] = claim_map_context(claim, alice)["pending_reasons"]
    assert reason.kind == "quota"
    assert reason.text.startswith("The namespace's ResourceQuota does not allow this")
    assert "exceeded quota: gpus" in reason.cluster_says


def test_it_judges_the_request_against_the_published_devices(map_cluster: Cluster) -> None:
    inv = map_cluster.inventory

    def explain(request: Any, message: str = "", held: list[Hold] | None = None) -> list[Any]:
        return why_pending.explain(
            asked=request, inventory=inv, holds=held or [], pod_message=message
        )

    [unknown] = explain(asked(device_class="tpu.example.com"))
    assert unknown.text == "The device class tpu.example.com does not exist on this cluster."
    [too_many] = explain(asked(count=3, selector=H100_ONLY))
    assert too_many.kind == "too_many"
    assert too_many.text == (
        "You asked for 3 devices on one node, but at most 2 of class gpu.nvidia.com and "
        "matching your selector sit on one node."
    )
    assert explain(asked(count=2, selector=H100_ONLY)) == []
    assert explain(asked(count=None, device_class="mig.nvidia.com")) == []
    mig = [d for d in inv["devices"] if d["attributes"].get("type") == "mig"]
    one = Hold(7, "", "", "", frozenset({(mig[0]["driver"], mig[0]["pool"], mig[0]["name"])}))
    [all_of_them] = explain(asked(count=None, device_class="mig.nvidia.com"), held=[one])
    assert all_of_them.kind == "held"
    assert all_of_them.text == (
        "1 of the 3 devices of class mig.nvidia.com is held by 1 other claim. At most 2 are "
        "free on one node; you need all of them free on one node. The claim gets its devices "
        "once enough of them are released."
    )


def test_it_passes_on_other_scheduling_problems_in_plain_words(map_cluster: Cluster) -> None:
    [other] = why_pending.explain(
        asked=asked(), inventory=map_cluster.inventory, holds=[], pod_message=AFFINITY
    )
    assert other.kind == "unschedulable"
    assert other.text == (
        "Kubernetes found no node for the Pod for a reason other than its devices."
    )
    assert other.cluster_says == AFFINITY
    # What the scheduler says when a class is missing, even before the inventory knows it.
    missing = (
        "0/2 nodes are available: request gpu: device class gpu.example.com does not exist. "
        "still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not "
        "helpful for scheduling."
    )
    [unknown] = why_pending.explain(asked=asked(), inventory={}, holds=[], pod_message=missing)
    assert (unknown.kind, unknown.cluster_says) == ("unknown_class", missing)
    assert why_pending.explain(asked=asked(), inventory={}, holds=[]) == []


def test_the_pages_explain_and_link_to_the_matching_devices(
    alice: User, bob: User, map_cluster: Cluster, namespace_of: Any, map_kubesim: Any
) -> None:
    waiting = applied_claim(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    taken_behind_the_queues_back(map_kubesim, bob, namespace_of(bob), count=2, selector=H100_ONLY)
    run = started_run(alice, waiting)
    scheduler_said(run, map_cluster, "cannot allocate all claims")
    client = Client()
    client.force_login(alice)
    link = reverse("cluster-claim-map", args=[map_cluster.pk, waiting.pk]) + "#gpu-map"

    for url in (reverse("claim", args=[waiting.pk]), reverse("run", args=[run.pk])):
        content = client.get(url).content.decode()
        assert 'id="why-pending"' in content
        assert "held by 1 other claim." in content
        assert f'<a href="{link}">See the matching devices on the GPU map</a>' in content
        assert not re.search(r"\bbob\b", content)  # as a word: a CSRF token may hold "bob"
    client.force_login(bob)
    assert client.get(reverse("run", args=[run.pk])).status_code == 404


def test_it_says_only_what_lasts_while_no_pod_waits(
    alice: User, bob: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    held_by_a_stuck_pod(bob, namespace_of(bob), count=2, selector=H100_ONLY)
    idle = applied_claim(alice, namespace_of(alice), count=1, selector=H100_ONLY)

    assert claim_map_context(idle, alice)["pending_reasons"] == []
    no_such = "device.attributes['gpu.nvidia.com'].productName == 'No Such GPU'"
    ClaimRequest.objects.filter(pk=idle.pk).update(selector=no_such)
    idle.refresh_from_db()
    assert kinds(claim_map_context(idle, alice)["pending_reasons"]) == ["no_match"]


# What a kubelet records when a DRA driver's NodePrepareResources fails: the Pod stays Pending
# (its containers never created) and only this Event says why.
PREPARE_FAILED = (
    "Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim "
    "{claim}: error preparing devices: GPU gpu-0 is in a bad state (Xid 79)"
)


@pytest.fixture(scope="module")
def quiet_kubesim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubesim.Handle]:
    """The map's cluster without kubelets: Pods are scheduled and bound but never start, so
    their status says nothing beyond PodScheduled."""
    path = Path(tmp_path_factory.mktemp("topology")) / "quiet.yaml"
    path.write_text(TOPOLOGY)
    handle = kubesim.start(topology=str(path), speed=20, kubelet=False)
    yield handle
    handle.stop()


@pytest.fixture
def quiet_cluster(db: None, quiet_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(quiet_kubesim, name="quiet")
    gateways.forget_gateways()


def active_namespace(user: User, cluster: Cluster) -> NamespaceRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"quiet-{uuid.uuid4().hex[:6]}"
    )
    transition(ns, to="approved", allowed=("pending",))
    assert cluster_steps.apply_namespace(ns)
    ns.refresh_from_db()
    return ns


def kubelet_event(run: VerificationRun, reason: str, message: str) -> dict[str, Any]:
    """A core/v1 Event about the run's Pod, as the kubelet of its node writes one."""
    namespace = run.claim.namespace
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{run.pod_name}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": run.pod_name,
            "namespace": namespace,
            "uid": run.pod_uid,
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": "gpu-node-1"},
        "reportingComponent": "kubelet",
        "reportingInstance": "gpu-node-1",
        "count": 1,
    }


def test_it_says_what_only_the_pods_events_carry(
    alice: User, quiet_cluster: Cluster, quiet_kubesim: kubesim.Handle
) -> None:
    ns = active_namespace(alice, quiet_cluster)
    claim = applied_claim(alice, ns, count=1, selector=H100_ONLY)
    run = started_run(alice, claim)
    message = PREPARE_FAILED.format(claim=f"{ns.name}/{claim.name}")
    events = f"/api/v1/namespaces/{ns.name}/events"
    quiet_kubesim.admin(
        "POST", events, kubelet_event(run, "FailedPrepareDynamicResources", message)
    )

    def warned() -> bool:
        sync.sync_cluster(quiet_cluster)
        run.refresh_from_db()
        return bool(run.pod_warnings)

    wait_until(warned, timeout=15)

    # Bound, and its status says nothing more: no container ever started or failed.
    pod = quiet_kubesim.admin("GET", f"/api/v1/namespaces/{ns.name}/pods/{run.pod_name}")
    assert pod["spec"]["nodeName"] == "gpu-node-1" and pod["status"]["phase"] == "Pending"
    assert not pod["status"].get("containerStatuses")
    assert (run.state, run.pod_stage) == ("pending", "bound")
    assert run.state_message == (
        "Bound to node gpu-node-1; the kubelet is preparing its containers (ContainerCreating)."
    )
    assert [(w["reason"], w["message"]) for w in run.pod_warnings] == [
        ("FailedPrepareDynamicResources", message)
    ]
    [reason] = run_pending_context(run, alice)["pending_reasons"]
    assert reason.kind == "prepare"
    assert reason.text.startswith("The node could not prepare the claim's devices for the Pod")
    assert reason.cluster_says == message
    client = Client()
    client.force_login(alice)
    content = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "The node could not prepare the claim&#x27;s devices" in content
    assert "GPU gpu-0 is in a bad state (Xid 79)" in content


def test_it_reads_the_schedulers_events_of_a_pending_pod_only(
    alice: User, bob: User, map_cluster: Cluster, namespace_of: Any, map_kubesim: Any
) -> None:
    waiting = applied_claim(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    stuck = taken_behind_the_queues_back(
        map_kubesim, bob, namespace_of(bob), count=2, selector=H100_ONLY
    )
    run = started_run(alice, waiting)
    scheduler_said(run, map_cluster, "cannot allocate all claims")

    def warned() -> bool:
        sync.sync_cluster(map_cluster)
        run.refresh_from_db()
        return bool(run.pod_warnings)

    wait_until(warned, timeout=15)

    # kubesim's scheduler writes it through events.k8s.io; the portal reads it as core/v1.
    latest = run.pod_warnings[0]
    assert latest["reason"] == "FailedScheduling"
    assert latest["message"].startswith("0/2 nodes are available: 2 cannot allocate all claims")
    # A bound Pod (the one holding the devices) keeps no complaint of the scheduler.
    [bound] = stuck.runs.all()
    assert all(w["reason"] != "FailedScheduling" for w in bound.pod_warnings)
    # Read once per POD_WARNINGS_EVERY, not on every pass.
    read_at = run.pod_warnings_read_at
    sync.sync_cluster(map_cluster)
    run.refresh_from_db()
    assert run.pod_warnings_read_at == read_at


def test_it_explains_from_events_when_the_status_says_nothing(map_cluster: Cluster) -> None:
    inv = map_cluster.inventory

    def explain(*warnings: tuple[str, str]) -> list[Any]:
        found = [{"reason": reason, "message": message} for reason, message in warnings]
        return why_pending.explain(asked=asked(), inventory=inv, holds=[], pod_warnings=found)

    [unschedulable] = explain(("FailedScheduling", AFFINITY))
    assert (unschedulable.kind, unschedulable.cluster_says) == ("unschedulable", AFFINITY)
    pull = 'Failed to pull image "nvcr.io/x:1": not found'
    # Newest first: the kubelet's terse "Error: ..." comes after the event that says why.
    [image] = explain(("Failed", "Error: ErrImagePull"), ("Failed", pull))
    assert (image.kind, image.cluster_says) == ("image", pull)
    [quota] = explain(("FailedCreate", 'pods "x" is forbidden: exceeded quota: gpus'))
    assert quota.kind == "quota"
    [mount, sandbox] = explain(
        ("FailedMount", "MountVolume.SetUp failed"),
        ("FailedCreatePodSandBox", "no IP addresses available"),
        ("FailedMount", "MountVolume.SetUp failed again"),
    )
    assert mount.text == "Kubernetes reported a problem with the Pod (FailedMount)."
    assert mount.cluster_says == "FailedMount: MountVolume.SetUp failed"
    assert sandbox.kind == "warning"
