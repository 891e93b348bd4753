"""Several clusters side by side, with a real worker: each is followed by its own loop (a slow
one delays no other), each serves its own requests, and one that goes down stops no other."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

import kubesim
from claims.clusters import registry as cluster_registry
from claims.clusters.registry import KUBECONFIG, ClusterInput
from claims.domain import services
from claims.models import ClaimRequest, Cluster
from claims.worker import cluster_loop, cluster_steps
from tests.claims.worker.test_cluster_ops import approved_claim, claims_in
from tests.fixtures.portal import register_cluster, state_of, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def syncs_seen(cluster: Cluster, seen: set[Any]) -> int:
    seen.add(Cluster.objects.get(pk=cluster.pk).last_synced_at)
    return len(seen - {None})


def test_a_slow_cluster_does_not_hold_up_the_others(
    alice: User,
    kubesim_cluster: kubesim.Handle,
    kubesim_private: kubesim.Handle,
    celery_beat_process: Any,
) -> None:
    # Its Pods take 15 s to list (longer than the client waits): its loop's caches never
    # become current. Set before the cluster is registered, so its loop lists them slowly
    # (registering lists classes, slices and claims, not Pods).
    fault = {"path": "^/api/v1/pods$", "latency_ms": 15000}
    kubesim_private.admin("POST", "/_kubesim/faults", json=fault)
    # Named to sort first: one thread looping over the clusters would follow it first.
    slow = register_cluster(kubesim_private, name="a-slow")
    cluster_steps.apply_claim(approved_claim(alice, slow))  # something to follow there
    fast = register_cluster(kubesim_cluster, name="b-fast")
    fast_syncs: set[Any] = set()
    slow_syncs: set[Any] = set()
    # Each loop records that its cluster is current every 2 s. Followed in one thread, the
    # fast cluster would wait for the slow one: here three come while the slow one never is.
    wait_until(lambda: syncs_seen(fast, fast_syncs) >= 3, timeout=60)
    assert syncs_seen(slow, slow_syncs) == 0
    assert Cluster.objects.get(pk=fast.pk).last_error == ""


def approved_flow(owner: User, approver: User, cluster: Cluster) -> ClaimRequest:
    """A namespace and a claim in it, asked for and approved: the worker takes it from here."""
    ns = services.namespace_request_submit(
        user=owner, cluster=cluster, name=f"on-{cluster.name}-{uuid.uuid4().hex[:4]}"
    )
    claim = services.claim_request_submit(
        user=owner, namespace_request=ns, name="train", device_class="gpu.nvidia.com", count=1
    )
    services.claim_request_approve(user=approver, claim_request=claim)
    return claim


def run_passes(owner: User, claim: ClaimRequest) -> None:
    run = services.verification_run_start(user=owner, claim_request=claim)
    wait_until(lambda: state_of(run) in ("succeeded", "failed"), timeout=90)
    assert run.state == "succeeded", run.state_message


def test_each_cluster_serves_its_own_requests_and_one_down_stops_no_other(
    alice: User,
    carol: User,
    kubesim_cluster: kubesim.Handle,
    kubesim_private: kubesim.Handle,
    celery_beat_process: Any,
) -> None:
    first = register_cluster(kubesim_cluster, name="first")  # a kubeconfig file
    # An uploaded kubeconfig: the worker reads it decrypted, in memory.
    text = Path(kubesim_private.kubeconfig).read_text()
    second = cluster_registry.save_cluster(ClusterInput("second", KUBECONFIG, text, "kubesim"))
    assert cluster_registry.contact(second).reachable
    for cluster, handle in ((first, kubesim_cluster), (second, kubesim_private)):
        claim = approved_flow(alice, carol, cluster)
        wait_until(lambda claim=claim: state_of(claim) == "waiting", timeout=60)
        assert claims_in(handle, claim.namespace) == ["train"]
        run_passes(alice, claim)

    kubesim_private.stop()
    stuck = approved_flow(alice, carol, second)
    wait_until(lambda: Cluster.objects.get(pk=second.pk).unreachable_since, timeout=60)
    claim = approved_flow(alice, carol, first)
    wait_until(lambda: state_of(claim) == "waiting", timeout=60)
    run_passes(alice, claim)
    assert claims_in(kubesim_cluster, claim.namespace) == ["train"]
    assert state_of(stuck) in ("approved", "applying")  # waits for its cluster, fails nothing
    healthy = Cluster.objects.get(pk=first.pk)
    assert healthy.unreachable_since is None and healthy.last_error == ""
    assert "connection refused" in Cluster.objects.get(pk=second.pk).last_error


def follower_thread_objects(cluster: Cluster) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"follower-{cluster.pk}"]


def follower_threads() -> set[str]:
    return {thread.name for thread in threading.enumerate() if thread.name.startswith("follower-")}


@override_settings(FOLLOWER_LEASE_SECONDS=1.5)
def test_the_followers_take_new_clusters_and_a_dead_one_stalls_no_other(
    alice: User, kubesim_cluster: kubesim.Handle, kubesim_private: kubesim.Handle
) -> None:
    first = register_cluster(kubesim_cluster, name="first")
    stop = threading.Event()
    command = threading.Thread(
        target=cluster_loop.follow_all, args=(stop,), kwargs={"look_every": 0.2}
    )
    command.start()
    try:
        wait_until(lambda: Cluster.objects.get(pk=first.pk).follower, timeout=30)
        # Registered while the command runs: followed without a restart.
        text = Path(kubesim_private.kubeconfig).read_text()
        second = cluster_registry.save_cluster(ClusterInput("second", KUBECONFIG, text, "kubesim"))
        wait_until(lambda: Cluster.objects.get(pk=second.pk).follower, timeout=30)
        spare = register_cluster(kubesim_cluster, name="spare")
        wait_until(lambda: f"follower-{spare.pk}" in follower_threads(), timeout=30)
        cluster_registry.remove_cluster(spare)  # its follower ends
        wait_until(lambda: f"follower-{spare.pk}" not in follower_threads(), timeout=30)

        # Its follower reads its inventory too.
        wait_until(lambda: Cluster.objects.get(pk=second.pk).inventory.get("devices"), timeout=30)
        second.refresh_from_db()
        cluster_steps.apply_claim(approved_claim(alice, second))  # something followed there
        kubesim_private.stop()
        wait_until(lambda: Cluster.objects.get(pk=second.pk).unreachable_since, timeout=60)
        assert "connection refused" in Cluster.objects.get(pk=second.pk).last_error
        # The first cluster's follower goes on: a claim applied there is seen allocated.
        claim = approved_claim(alice, first)
        cluster_steps.apply_claim(claim)
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        wait_until(lambda: state_of(run) in ("succeeded", "failed"), timeout=60)
        assert run.state == "succeeded", run.state_message
        assert Cluster.objects.get(pk=first.pk).unreachable_since is None
    finally:
        stop.set()
        command.join(timeout=60)


@override_settings(FOLLOWER_LEASE_SECONDS=1.5)
def test_the_follower_follows_anew_when_an_admin_changes_the_credentials(
    alice: User, kubesim_cluster: kubesim.Handle, kubesim_private: kubesim.Handle
) -> None:
    old_text = Path(kubesim_private.kubeconfig).read_text()
    cluster = cluster_registry.save_cluster(ClusterInput("moving", KUBECONFIG, old_text, "kubesim"))
    cluster_registry.contact(cluster)
    stop = threading.Event()
    command = threading.Thread(
        target=cluster_loop.follow_all, args=(stop,), kwargs={"look_every": 0.2}
    )
    command.start()
    try:
        wait_until(lambda: Cluster.objects.get(pk=cluster.pk).follower, timeout=30)
        new_text = Path(kubesim_cluster.kubeconfig).read_text()
        cluster = cluster_registry.save_cluster(
            ClusterInput("moving", KUBECONFIG, new_text, "kubesim"), cluster
        )
        kubesim_private.stop()  # nothing more to see there
        claim = approved_claim(alice, cluster)
        cluster_steps.apply_claim(claim)  # on the new cluster
        assert claims_in(kubesim_cluster, claim.namespace) == ["train"]
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        # Only a follower watching the new cluster sees the run's Pod to its end.
        wait_until(lambda: state_of(run) in ("succeeded", "failed"), timeout=60)
        assert run.state == "succeeded", run.state_message
    finally:
        stop.set()
        command.join(timeout=60)


@override_settings(FOLLOWER_LEASE_SECONDS=1.5)
def test_a_cluster_whose_connection_cannot_be_made_is_waited_for_not_retried_in_a_loop(
    kubesim_cluster: kubesim.Handle, caplog: pytest.LogCaptureFixture
) -> None:
    broken = register_cluster(kubesim_cluster, name="broken")
    # As if its key were gone: the stored kubeconfig no longer decrypts.
    Cluster.objects.filter(pk=broken.pk).update(kubeconfig_encrypted="gAAAA-not-a-token")
    stop = threading.Event()
    command = threading.Thread(
        target=cluster_loop.follow_all, args=(stop,), kwargs={"look_every": 0.2}
    )
    command.start()
    try:
        wait_until(lambda: Cluster.objects.get(pk=broken.pk).unreachable_since, timeout=30)
        assert "does not decrypt" in Cluster.objects.get(pk=broken.pk).last_error
        [thread] = follower_thread_objects(broken)
        tries = lambda: caplog.text.count("cannot follow cluster")  # noqa: E731
        first = wait_until(tries, timeout=30)
        wait_until(lambda: tries() > first, timeout=30)
        # The same follower waited and tried again: none died to be started anew.
        assert follower_thread_objects(broken) == [thread] and thread.is_alive()
    finally:
        stop.set()
        command.join(timeout=60)
