"""The cluster loop: informers (list once, then watch), one active loop per cluster (its lease),
and everything it feeds from its caches with no list on a timer."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

import kubesim
from claims.clusters import gateways
from claims.domain import access, services
from claims.kube import labels as label_keys
from claims.kube import parsing, pod_parsing
from claims.kube.gateway import ClusterGateway
from claims.kube.informer import Informer
from claims.models import Cluster, NamespaceRequest, Workload, WorkloadLog, managed_labels
from claims.worker import cluster_loop, cluster_steps, lease, workload_steps
from claims.worker.cluster_view import AllocationsSeen
from claims.worker.log_streams import WORKLOAD_STREAM
from tests.claims.worker.test_orphans import present
from tests.claims.worker.test_sync import api_calls, applied_claims, cluster_log
from tests.fixtures.kubesim import create_namespace
from tests.fixtures.portal import register_cluster, wait_until
from tests.fixtures.workloads import BATCH, seeded_profile

SELECTOR = "app=followed"


def pod(namespace: str, name: str, app: str = "followed") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest.fixture
def gateway(kubesim_private: kubesim.Handle) -> Iterator[ClusterGateway]:
    with ClusterGateway(kubesim_private.kubeconfig, qps=100, burst=100) as gateway:
        yield gateway


def start_informer(gateway: ClusterGateway, **options: Any) -> Informer:
    informer = Informer(gateway, "Pod", SELECTOR, pod_parsing.pod_state, lambda: None, **options)
    return informer.start()


def cached_names(informer: Informer) -> set[str]:
    return {state.name for state in informer.snapshot()[0]}


def test_the_informer_lists_once_then_follows_each_change_by_watching(
    kubesim_private: kubesim.Handle, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_private)
    gateway.create(pod(namespace, "before"))
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    informer = start_informer(gateway)
    try:
        wait_until(lambda: cached_names(informer) == {"before"})
        for manifest in (pod(namespace, "p1"), pod(namespace, "p2"), pod(namespace, "x", "other")):
            gateway.create(manifest)
        gateway.delete("v1", "Pod", namespace, "before")
        wait_until(lambda: cached_names(informer) == {"p1", "p2"})
        calls = api_calls(kubesim_private)
        assert (informer.lists, calls.get("list pods")) == (1, 1)
        assert calls.get("watch pods") == 1
    finally:
        informer.stop()


def test_the_informer_takes_a_write_it_cannot_see_for_no_change() -> None:
    """Each change wakes a pass of the follower: a write that changes nothing the parse reads
    (a label the portal does not read, a condition's new time) must not."""
    signals: list[int] = []
    informer = Informer(None, "Pod", SELECTOR, pod_parsing.pod_state, lambda: signals.append(1))  # type: ignore[arg-type]
    created = pod("team-a", "p1") | {"status": {"phase": "Pending"}}
    created["metadata"] |= {"resourceVersion": "1", "uid": "u1"}

    def written(version: str, **changes: Any) -> dict[str, Any]:
        obj = json.loads(json.dumps(created))
        obj["metadata"]["resourceVersion"] = version
        for part, values in changes.items():
            obj[part] |= values
        return obj

    informer._apply(
        iter(
            [
                ("ADDED", created),
                ("MODIFIED", written("2", metadata={"labels": {"app": "followed", "x": "y"}})),
                ("MODIFIED", written("3", status={"conditions": [{"type": "PodScheduled"}]})),
                ("BOOKMARK", {"metadata": {"resourceVersion": "4"}}),
                ("MODIFIED", written("5", status={"phase": "Running"})),
                ("DELETED", written("6")),
            ]
        )
    )
    assert len(signals) == 3  # added, running, deleted
    assert informer.resource_version == "6"


def test_the_informer_lists_again_when_its_version_was_compacted(
    kubesim_private: kubesim.Handle, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_private)
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/pods", "watch": "drop"})
    informer = start_informer(gateway)
    try:
        wait_until(lambda: informer.current_at is not None)
        gateway.create(pod(namespace, "after-compaction"))  # unseen: every watch ends at once
        kubesim_private.admin("POST", "/_kubesim/compact")
        kubesim_private.admin("DELETE", "/_kubesim/faults")
        wait_until(lambda: informer.lists == 2, timeout=30)
        wait_until(lambda: cached_names(informer) == {"after-compaction"})
    finally:
        informer.stop()


def test_the_informer_takes_a_silent_stream_for_dead_and_resumes(
    kubesim_private: kubesim.Handle, gateway: ClusterGateway
) -> None:
    namespace = create_namespace(kubesim_private)
    kubesim_private.admin("POST", "/_kubesim/faults", {"path": "/pods", "watch": "silent"})
    informer = start_informer(gateway, watch_seconds=60, silence_seconds=1)
    try:
        wait_until(lambda: "stream broke" in informer.error, timeout=30)
        kubesim_private.admin("DELETE", "/_kubesim/faults")
        gateway.create(pod(namespace, "after-silence"))
        wait_until(lambda: cached_names(informer) == {"after-silence"}, timeout=30)
        assert informer.lists == 1  # resumed from where it was, not listed again
    finally:
        informer.stop()


def start_follower(cluster: Cluster, holder: str = "") -> tuple[Any, Callable[[], None]]:
    """Start a follower in a thread; returns it and what stops it."""
    stop = threading.Event()
    one = cluster_loop.ClusterLoop(cluster.pk, stop, holder=holder)
    thread = threading.Thread(target=one.run, daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join(timeout=30)

    return one, stopped


def run_follower(cluster: Cluster, holder: str = "") -> Callable[[], None]:
    return start_follower(cluster, holder)[1]


@pytest.mark.django_db(transaction=True)
def test_the_follower_follows_a_run_to_its_end_without_polling(
    alice: User, cluster: Cluster, kubesim_cluster: kubesim.Handle
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    kubesim_cluster.admin("POST", "/_kubesim/counters/reset")
    stop = run_follower(cluster)
    try:
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        wait_until(lambda: run.refresh_from_db() or run.is_final, timeout=60)
        assert run.state == "succeeded", run.state_message
        logs = {log.container: log.text for log in run.logs.all()}
        path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}/log?container="
        for container in ("ctr0", "ctr1"):  # each line once, whether streamed or read
            assert logs[container].splitlines() == cluster_log(kubesim_cluster, path + container)
        assert "Result = PASS" in logs["ctr1"]
        [device] = run.devices  # the Pod held its GPU for a moment: the loop saw which
        assert device["attributes"]["productName"] == run.device_name
        wait_until(lambda: claim.refresh_from_db() or claim.state == "waiting", timeout=30)
        calls = api_calls(kubesim_cluster)
        # One list of the portal's claims, one of those made outside it (what they hold).
        assert (calls.get("list pods"), calls.get("list resourceclaims")) == (1, 2)
    finally:
        stop()
    assert Cluster.objects.get(pk=cluster.pk).follower == ""  # the lease let go


@pytest.mark.django_db(transaction=True)
@override_settings(FOLLOWER_LEASE_SECONDS=1.5)
def test_a_second_follower_waits_and_takes_over_when_the_holder_dies(cluster: Cluster) -> None:
    assert lease.take_lease(cluster.pk, "a-follower-that-dies")  # and never renews
    stop = run_follower(cluster, holder="standby")
    try:
        assert Cluster.objects.get(pk=cluster.pk).follower == "a-follower-that-dies"
        wait_until(lambda: Cluster.objects.get(pk=cluster.pk).follower == "standby", timeout=30)
        # ... and keeps it: a renewed lease outlives the first one.
        first_until = Cluster.objects.get(pk=cluster.pk).follower_lease_until
        wait_until(lambda: Cluster.objects.get(pk=cluster.pk).follower_lease_until > first_until)
        assert not lease.take_lease(cluster.pk, "a-third-copy")
    finally:
        stop()


def test_beat_asks_no_cluster_anything() -> None:
    """Each cluster's loop watches it; beat's tasks read the database only."""
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled == {
        "claims.worker.tasks.reconcile",
        "claims.worker.tasks.expire_claims",
        "claims.worker.tasks.reclaim_idle_claims",  # the database and Prometheus only
        "claims.worker.tasks.purge_expired_tokens",
        "claims.api.tasks.purge_expired_idempotency",
    }


def test_the_health_check_fails_while_a_cluster_has_no_live_follower(cluster: Cluster) -> None:
    with pytest.raises(CommandError, match="no live follower for: kubesim"):
        call_command("follow_clusters", "--check")
    assert lease.take_lease(cluster.pk, "a-follower")
    call_command("follow_clusters", "--check")


@pytest.mark.django_db(transaction=True)
def test_the_follower_streams_the_logs_of_each_running_container_until_it_ends(
    alice: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    [claim] = applied_claims(alice, slow_cluster, 1)
    one, stop = start_follower(slow_cluster)
    try:
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        streamed = wait_until(lambda: one.log_streams and one.log_streams.streamed(), timeout=60)
        assert {container for run_id, container in streamed if run_id == run.pk} <= {
            "ctr0",
            "ctr1",
        }
        wait_until(lambda: run.refresh_from_db() or run.is_final, timeout=60)
        wait_until(lambda: not one.log_streams.streams)  # ended with the Pod
        assert run.state == "succeeded", run.state_message
        path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}/log?container="
        for container in ("ctr0", "ctr1"):
            text = run.logs.get(container=container).text
            assert text.splitlines() == cluster_log(slow_kubesim, path + container)
    finally:
        stop()


@pytest.mark.django_db(transaction=True)
def test_the_follower_keeps_the_inventory_current_as_slices_change(
    kubesim_private: kubesim.Handle,
) -> None:
    cluster = register_cluster(kubesim_private, name="growing")
    devices_before = len(cluster.inventory["devices"])
    stop = run_follower(cluster)
    try:
        kubesim_private.admin(
            "POST",
            "/apis/resource.k8s.io/v1/resourceslices",
            {
                "metadata": {"name": "new-node-gpu.nvidia.com"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "new-node",
                    "pool": {"name": "new-node", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
                },
            },
        )

        def devices() -> list[dict]:
            return Cluster.objects.get(pk=cluster.pk).inventory["devices"]

        wait_until(lambda: len(devices()) == devices_before + 1)
        assert any(device["node"] == "new-node" for device in devices())
    finally:
        stop()
        gateways.forget_gateways()


@pytest.mark.django_db(transaction=True)
def test_the_follower_sees_a_namespace_deleted_outside_the_portal_on_its_watch(
    alice: User, kubesim_private: kubesim.Handle
) -> None:
    cluster = register_cluster(kubesim_private, name="watched-namespaces")
    [claim] = applied_claims(alice, cluster, 1)
    ns = claim.namespace_request
    ns.refresh_from_db()
    assert ns.state == "active"
    # Settled long enough that a missing namespace is drift, not a cache not yet current.
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=timezone.now() - timedelta(minutes=1))
    kubesim_private.admin("POST", "/_kubesim/counters/reset")
    stop = run_follower(cluster)
    try:
        wait_until(lambda: Cluster.objects.get(pk=cluster.pk).follower)
        kubesim_private.admin("DELETE", f"/api/v1/namespaces/{ns.name}")
        wait_until(lambda: "deleted outside the portal" in state_message_of(ns), timeout=30)
        assert api_calls(kubesim_private).get("list namespaces") == 1  # then the watch
    finally:
        stop()
        gateways.forget_gateways()


def state_message_of(ns: NamespaceRequest) -> str:
    ns.refresh_from_db()
    return ns.state_message


def lists_in(calls: dict[str, int]) -> dict[str, int]:
    return {call: count for call, count in calls.items() if call.startswith("list ")}


@pytest.mark.django_db(transaction=True)
@override_settings(RECONCILE_INTERVAL_SECONDS=0.2, ORPHAN_SWEEP_INTERVAL_SECONDS=0.2)
def test_the_loop_heals_drift_and_sweeps_orphans_from_its_caches_with_no_list_on_a_timer(
    alice: User, kubesim_private: kubesim.Handle
) -> None:
    cluster = register_cluster(kubesim_private, name="reconciled")
    [claim] = applied_claims(alice, cluster, 1)
    ns = NamespaceRequest.objects.get(pk=claim.namespace_request_id)
    access.grant_access(ns)
    # Settled long enough that a missing object is drift, not a cache not yet current.
    NamespaceRequest.objects.filter(pk=ns.pk).update(updated=timezone.now() - timedelta(minutes=1))
    one, stop = start_follower(cluster)
    try:
        wait_until(lambda: one.checks and one.sweeps, timeout=30)
        kubesim_private.admin("POST", "/_kubesim/counters/reset")
        checks, sweeps = one.checks, one.sweeps
        # Removed outside the portal: seen on the RoleBinding watch, granted again by the user.
        binding = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns.name}/rolebindings"
        kubesim_private.admin("DELETE", f"{binding}/gpu-portal-alice")
        wait_until(lambda: NamespaceRequest.objects.get(pk=ns.pk).access_granted_at is None)
        # An object of ours whose request is gone: swept from the cache.
        gone = str(2**40)
        orphan = {
            "metadata": {
                "name": f"orphan-{ns.pk}",
                "labels": managed_labels() | {label_keys.NAMESPACE_REQUEST: gone},
            }
        }
        kubesim_private.admin("POST", "/api/v1/namespaces", orphan)
        path = f"/api/v1/namespaces/orphan-{ns.pk}"
        wait_until(lambda: not present(kubesim_private, path))  # terminating, or gone
        wait_until(lambda: one.checks > checks + 5 and one.sweeps > sweeps + 5, timeout=30)
        assert lists_in(api_calls(kubesim_private)) == {}  # the resyncs and sweeps: caches
    finally:
        stop()
        gateways.forget_gateways()


def test_a_claim_allocated_and_freed_between_two_passes_is_still_seen_allocated_once() -> None:
    """A short Pod's claim may be allocated and freed before the loop's next pass: the pass
    sees the allocation once (and so the run's GPU), the next one sees it freed."""
    seen = AllocationsSeen()
    claim = {"metadata": {"namespace": "team-a", "name": "train", "uid": "u1"}}
    allocated = claim | {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n", "device": "g"}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "run-1"}],
        }
    }
    [seen.parse(obj) for obj in (claim, allocated)]
    freed = seen.parse(claim)
    [replayed], again = seen.replay([freed])
    assert again and replayed.allocated and replayed.reserved_for == ["run-1"]
    assert seen.replay([freed]) == ([freed], False)
    # Another claim of the same name (deleted and made again) is not the one allocated.
    seen.parse(allocated)
    other = parsing.claim_state(claim | {"metadata": claim["metadata"] | {"uid": "u2"}})
    assert seen.replay([other]) == ([other], False)


@pytest.mark.django_db(transaction=True)
def test_the_follower_follows_a_job_to_its_end_streaming_its_log(
    alice: User, slow_cluster: Cluster, slow_kubesim: kubesim.Handle
) -> None:
    """The Job informer says when the Job ended; its Pod's log comes by stream while it runs."""
    [claim] = applied_claims(alice, slow_cluster, 1)
    one, stop = start_follower(slow_cluster)
    try:
        job = services.workload_start(
            user=alice,
            claim_request=claim,
            profile=seeded_profile(BATCH),
            image="ghcr.io/gpu-portal/train-sim:1.0",
            command="train-sim",
            args="--steps 4 --step-seconds 1",
        )
        workload_steps.start_workload(Workload.objects.get(pk=job.pk))
        streamed = wait_until(lambda: one.log_streams and one.log_streams.streamed(), timeout=60)
        assert (job.pk, WORKLOAD_STREAM) in streamed
        # Lines arrive while it runs, before its end.
        wait_until(lambda: "step 1/4" in _log_text(job), timeout=60)
        assert not Workload.objects.get(pk=job.pk).is_final
        wait_until(lambda: Workload.objects.get(pk=job.pk).is_final, timeout=60)
        job.refresh_from_db()
        assert job.state == "succeeded", job.state_message
        assert job.exit_code == 0
        text = _log_text(job)
        assert text.count("epoch 1/1 step 4/4") == 1 and text.endswith("train-sim: done\n")
    finally:
        stop()


def _log_text(workload: Workload) -> str:
    log = WorkloadLog.objects.filter(workload=workload).first()
    return log.text if log else ""
