"""The sync, run in this process against kubesim: allocation, runs, logs, and its API cost."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from claims.clusters import gateways
from claims.clusters import registry as cluster_registry
from claims.domain import run_observations, services
from claims.domain.transitions import transition
from claims.kube import manifests
from claims.models import ClaimRequest, Cluster, VerificationRun
from claims.worker import cluster_steps, lease, sync
from claims.worker.cluster_view import LiveView
from tests.fixtures.portal import wait_until


def applied_claims(
    user: User, cluster: Cluster, how_many: int, count: int = 1, applied_count: int = 0
) -> list[ClaimRequest]:
    """Claims applied to kubesim for real (the approval's messages are not sent: `db` only).

    applied_count: apply more devices than the portal accepts (a claim from before a node left).
    """
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"sync-{uuid.uuid4().hex[:6]}"
    )
    claims = []
    for index in range(how_many):
        claim = services.claim_request_submit(
            user=user,
            namespace_request=ns,
            name=f"c{index}",
            device_class="gpu.nvidia.com",
            count=count,
        )
        transition(claim, to="approved", allowed=("pending",))
        ns.refresh_from_db()
        if ns.state == "pending":
            transition(ns, to="approved", allowed=("pending",))
        if applied_count:
            ClaimRequest.objects.filter(pk=claim.pk).update(count=applied_count)
        claim.refresh_from_db()
        cluster_steps.apply_claim(claim)
        claims.append(claim)
    assert {c.state for c in claims} == {"waiting"}
    return claims


def api_calls(handle: Any) -> dict[str, int]:
    return handle.admin("GET", "/_kubesim/counters")["requests"]


def calls_of_one_sync(handle: Any, cluster: Cluster) -> dict[str, int]:
    handle.admin("POST", "/_kubesim/counters/reset")
    assert sync.sync_cluster(cluster)
    return api_calls(handle)


def stuck_pod(claim: ClaimRequest) -> dict:
    """A Pod using the claim whose image never pulls: it keeps the GPU allocated."""
    pod = manifests.verification_pod_manifest(
        namespace=claim.namespace, name=f"{claim.name}-user", claim_name=claim.name, labels={}
    )
    for container in pod["spec"]["containers"]:
        container["image"] = "registry.example.com/never:pulls"
    return pod


def test_it_costs_the_same_api_calls_for_2_or_12_claims(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    applied_claims(alice, cluster, 2)
    with_two = calls_of_one_sync(kubesim_cluster, cluster)
    applied_claims(alice, cluster, 10)
    with_twelve = calls_of_one_sync(kubesim_cluster, cluster)
    assert with_two == with_twelve == {"list resourceclaims": 1}


def test_it_asks_the_cluster_nothing_when_nothing_is_live(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    assert calls_of_one_sync(kubesim_cluster, cluster) == {}
    assert Cluster.objects.get().last_synced_at is not None


def test_it_shows_the_allocation_while_a_pod_uses_the_claim(alice: User, cluster: Cluster) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    gateway = gateways.gateway_for(cluster)
    gateway.apply(stuck_pod(claim))

    def in_use() -> bool:
        sync.sync_cluster(cluster)
        claim.refresh_from_db()
        return claim.state == "in_use"

    wait_until(in_use, timeout=10)
    [device] = claim.allocation["devices"]
    assert claim.node and device["pool"] == claim.node
    assert device["attributes"]["productName"].startswith("NVIDIA")
    assert re.fullmatch(r"\d+(Mi|Gi)", device["capacity"]["memory"])  # as NVML reports it

    gateway.delete("v1", "Pod", claim.namespace, f"{claim.name}-user")
    wait_until(lambda: not in_use(), timeout=10)
    assert claim.state == "waiting"
    assert claim.allocation is None
    assert "holds no GPU" in claim.state_message


def test_it_follows_a_run_and_keeps_each_log_line_once(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)

    def finished() -> bool:
        sync.sync_cluster(cluster)
        run.refresh_from_db()
        return run.is_final

    wait_until(finished, timeout=20, interval=0.02)
    assert run.state == "succeeded", run.state_message
    logs = {log.container: log.text for log in run.logs.all()}
    assert logs["ctr0"].count("Test PASSED") == 1
    assert logs["ctr1"].count("Result = PASS") == 1
    path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}/log?container=ctr1"
    assert logs["ctr1"].splitlines() == cluster_log(kubesim_cluster, path)


def cluster_log(handle: Any, path: str) -> list[str]:
    import ssl
    import urllib.request

    request = urllib.request.Request(handle.url + path)
    request.add_header("Authorization", f"Bearer {handle.token}")
    context = ssl.create_default_context(cadata=handle.ca_pem.decode())
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return response.read().decode().splitlines()


def test_it_says_why_a_run_cannot_be_scheduled(alice: User, cluster: Cluster) -> None:
    # 5 GPUs exist in the cluster (8), but no node has 5 (4 each): the Pod stays Pending.
    [claim] = applied_claims(alice, cluster, 1, count=4, applied_count=5)
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)

    def explained() -> bool:
        sync.sync_cluster(cluster)
        run.refresh_from_db()
        return "cannot allocate all claims" in run.state_message

    wait_until(explained, timeout=10)
    assert run.state == "pending"
    assert run.state_message.startswith("0/2 nodes are available")


def test_it_fails_a_run_whose_pod_vanished(alice: User, cluster: Cluster) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = services.verification_run_start(user=alice, claim_request=claim)
    transition(run, to="pending", allowed=("queued",))
    VerificationRun.objects.filter(pk=run.pk).update(updated=run.created - sync.GONE_GRACE * 2)
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert run.state == "failed"
    assert "no longer in the cluster" in run.state_message


def test_a_one_off_sync_leaves_a_cluster_to_the_loop_that_holds_its_lease(
    cluster: Cluster,
) -> None:
    assert lease.take_lease(cluster.pk, "a-loop")
    assert not sync.sync_cluster(cluster)
    lease.release_lease(cluster.pk, "a-loop")
    assert sync.sync_cluster(cluster)
    assert Cluster.objects.get(pk=cluster.pk).follower == ""  # let go after the look


def test_it_records_why_the_cluster_could_not_be_read(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    applied_claims(alice, cluster, 1)
    fault = {"path": "resourceclaims$", "error_codes": [503], "error_rate": 1.0}
    kubesim_cluster.admin("POST", "/_kubesim/faults", json=fault)
    try:
        assert sync.sync_cluster(cluster)
    finally:
        kubesim_cluster.admin("DELETE", "/_kubesim/faults")
    assert "503" in Cluster.objects.get(pk=cluster.pk).last_error
    sync.sync_cluster(cluster)
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""


def run_finished_unseen(
    user: User, cluster: Cluster, handle: Any
) -> tuple[ClaimRequest, VerificationRun]:
    """A run whose Pod ran and ended with no look: DRA has freed its GPU already."""
    [claim] = applied_claims(user, cluster, 1)
    run = services.verification_run_start(user=user, claim_request=claim)
    cluster_steps.start_run(run)

    def pod_done() -> bool:
        path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}"
        return handle.admin("GET", path)["status"].get("phase") == "Succeeded"

    wait_until(pod_done, timeout=10)
    return claim, run


def test_it_keeps_the_gpu_a_finished_run_was_last_seen_with(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    # The previous look saw the claim reserved for this Pod; by now DRA has freed the GPU.
    seen = {"node": "gpu-node-1", "reserved_for": [run.pod_name], "devices": [{"device": "gpu-3"}]}
    ClaimRequest.objects.filter(pk=claim.pk).update(state="in_use", allocation=seen)
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert run.state == "succeeded"
    assert run.devices == [{"device": "gpu-3"}]
    assert ClaimRequest.objects.get(pk=claim.pk).state == "waiting"


def test_it_records_the_devices_in_the_first_look_that_sees_the_pod_scheduled(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = services.verification_run_start(user=alice, claim_request=claim)
    run_observations.run_creating(run=run)
    pod = manifests.verification_pod_manifest(
        namespace=claim.namespace, name=run.pod_name, claim_name=claim.name, labels=run.labels()
    )
    gateway = gateways.gateway_for(cluster)

    class PodAppearsDuringTheLook(LiveView):
        """The Pod appears, and is scheduled, while the look's list of Pods is on the way."""

        def pods(self) -> Any:
            gateway.apply(pod)
            wait_until(lambda: _node_of(gateway, pod), interval=0.01)
            return super().pods()

    with lease.held_once(cluster.pk) as held:
        assert held
        sync.sync_from(cluster, PodAppearsDuringTheLook(gateway))  # one look
    run.refresh_from_db()
    [device] = run.devices
    assert device["device"].startswith("gpu-") and device["driver"] == "gpu.nvidia.com"
    assert run.node


def _node_of(gateway: Any, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    found = gateway.read("v1", "Pod", meta["namespace"], meta["name"]) or {}
    return str((found.get("spec") or {}).get("nodeName") or "")


def test_it_names_the_devices_deviceQuery_saw_when_the_allocation_was_missed(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    _, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    sync.sync_cluster(cluster)
    run.refresh_from_db()
    assert run.state == "succeeded"
    assert run.devices == [
        {
            "request": "",
            "driver": "",
            "pool": "",
            "device": "",
            "attributes": {"productName": run.device_name},
            "capacity": {},
            "source": "deviceQuery",
        }
    ]
    assert run.device_name.startswith("NVIDIA ")
    assert "named as deviceQuery printed them" in run.state_message


def test_a_sync_that_asks_the_cluster_nothing_keeps_why_it_is_unreachable(
    cluster: Cluster,
) -> None:
    """A check found the cluster down; a one-off sync that follows has nothing to follow
    and a fresh inventory, so it asks the cluster nothing and must not wipe the reason (the
    clusters list showed "unreachable" with no word why). Once it does read the cluster, the
    cluster is reachable again."""
    problem = "connection refused (nothing listens at the server's address)"
    cluster_registry.mark_unreachable(cluster.pk, problem)
    sync.sync_cluster(cluster)
    after = Cluster.objects.get(pk=cluster.pk)
    assert after.unreachable_since is not None and after.last_error == problem
    stale = timezone.now() - timedelta(seconds=settings.INVENTORY_REFRESH_SECONDS + 1)
    Cluster.objects.filter(pk=cluster.pk).update(inventory_synced_at=stale)
    sync.sync_cluster(cluster)  # reads the inventory: the cluster answers
    back = Cluster.objects.get(pk=cluster.pk)
    assert back.unreachable_since is None and back.last_error == ""


def test_a_loops_good_pass_keeps_an_outage_until_the_cluster_answered(
    cluster: Cluster,
) -> None:
    """A loop's pass reads its caches: it clears an outage (reason and all, never the
    reason alone) only once an inventory was read since the outage began."""
    problem = "connection refused (nothing listens at the server's address)"
    cluster_registry.mark_unreachable(cluster.pk, problem)
    since = Cluster.objects.get(pk=cluster.pk).unreachable_since
    assert since is not None
    Cluster.objects.filter(pk=cluster.pk).update(inventory_synced_at=since - timedelta(seconds=1))
    sync.record_outcome(Cluster.objects.get(pk=cluster.pk), [], sync.LOOP_RECORDS_EVERY)
    still = Cluster.objects.get(pk=cluster.pk)
    assert still.unreachable_since == since and still.last_error == problem
    Cluster.objects.filter(pk=cluster.pk).update(inventory_synced_at=timezone.now())
    sync.record_outcome(Cluster.objects.get(pk=cluster.pk), [], sync.LOOP_RECORDS_EVERY)
    back = Cluster.objects.get(pk=cluster.pk)
    assert back.unreachable_since is None and back.last_error == ""


def test_a_pass_that_cannot_reach_the_cluster_says_so_in_plain_words_at_once(
    cluster: Cluster,
) -> None:
    raw = (
        "ResourceClaims: cannot reach the cluster: HTTPSConnectionPool(host='127.0.0.1', "
        "port=9): Max retries exceeded (Caused by NewConnectionError('Failed to establish a "
        "new connection: [Errno 111] Connection refused'))"
    )
    sync.record_outcome(cluster, [raw], None)
    cluster.refresh_from_db()
    assert cluster.last_error == "connection refused (nothing listens at the server's address)"
    assert cluster.unreachable_since is not None
    sync.record_outcome(cluster, ["Pods: the server says no (500)"], None)
    cluster.refresh_from_db()
    assert cluster.last_error == "Pods: the server says no (500)"
