"""Runs follow their Pods whatever else fails: logs that cannot be read, a list that fails.

The failures are kubesim's injected faults (as a real API server answers when it cannot
reach a kubelet); nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from claims.clusters import gateways
from claims.domain import run_observations, services
from claims.domain.transitions import transition
from claims.kube.parsing import parse_time
from claims.models import ClaimRequest, Cluster, VerificationRun
from claims.worker import cluster_steps, sync
from claims.worker.cluster_view import LiveView
from tests.claims.worker.test_sync import applied_claims, run_finished_unseen, stuck_pod
from tests.fixtures.portal import wait_until


@contextmanager
def failing(handle: Any, path: str, code: int = 500) -> Iterator[None]:
    fault = {"path": path, "error_codes": [code], "error_rate": 1.0}
    handle.admin("POST", "/_kubesim/faults", json=fault)
    try:
        yield
    finally:
        handle.admin("DELETE", "/_kubesim/faults")


def synced(cluster: Cluster, obj: VerificationRun | ClaimRequest) -> VerificationRun | ClaimRequest:
    sync.sync_cluster(cluster)
    obj.refresh_from_db()
    return obj


def started_run(user: User, claim: ClaimRequest) -> VerificationRun:
    run = services.verification_run_start(user=user, claim_request=claim)
    cluster_steps.start_run(run)
    return run


def test_it_ends_a_run_from_its_pod_when_the_logs_cannot_be_read(
    alice: User, cluster: Cluster, kubesim_cluster: Any, client: Client
) -> None:
    _, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    with failing(kubesim_cluster, "/log$"):
        synced(cluster, run)

    assert run.state == "succeeded"
    assert run.passed is None
    injected = "500 InternalError: Internal error occurred: injected fault"
    assert run.log_error == f"ctr0: {injected}; ctr1: {injected}"  # each container was tried
    assert "logs could not be read (ctr0: 500 InternalError" in run.state_message
    assert run.log_retry_until and run.log_retry_until > timezone.now()
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""

    client.force_login(alice)
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "No verdict: the logs could not be read" in page
    assert "Logs could not be read: <bdi>ctr0: 500 InternalError: Internal error occurred" in page


def test_it_reads_the_logs_of_a_finished_run_once_the_cluster_lets_it(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    _, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    with failing(kubesim_cluster, "/log$"):
        synced(cluster, run)
    assert run.passed is None
    assert run.next_log_read_at and run.next_log_read_at > timezone.now()
    kubesim_cluster.admin("POST", "/_kubesim/counters/reset")
    synced(cluster, run)  # before its back-off has run: the kubelet is not asked again
    assert "log pods" not in kubesim_cluster.admin("GET", "/_kubesim/counters")["requests"]
    assert run.passed is None

    VerificationRun.objects.filter(pk=run.pk).update(next_log_read_at=timezone.now())
    synced(cluster, run)

    assert (run.state, run.passed, run.log_error, run.log_retry_until) == (
        "succeeded",
        True,
        "",
        None,
    )
    assert run.state_message == "Logs read after all: CUDA samples passed."
    assert run.device_name.startswith("NVIDIA ")
    assert "Test PASSED" in run.logs.get(container="ctr0").text


def test_it_gives_up_reading_the_logs_after_a_while(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    _, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    with failing(kubesim_cluster, "/log$", code=502):
        synced(cluster, run)
        VerificationRun.objects.filter(pk=run.pk).update(
            log_retry_until=timezone.now() - timedelta(seconds=1)
        )
        synced(cluster, run)

    assert run.log_retry_until is None
    assert "Gave up reading the logs: still unreadable: ctr0: 502" in run.state_message
    assert run.log_error.startswith("ctr0: 502")
    # The earlier syncs did ask (log_error holds the cluster's words); none does now.
    kubesim_cluster.admin("POST", "/_kubesim/counters/reset")
    synced(cluster, run)
    assert "log pods" not in kubesim_cluster.admin("GET", "/_kubesim/counters")["requests"]


def test_it_finishes_other_runs_while_one_runs_logs_cannot_be_read(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    first, second = applied_claims(alice, cluster, 2)
    unreadable, readable = started_run(alice, first), started_run(alice, second)
    with failing(kubesim_cluster, f"/{unreadable.pod_name}/log$", code=500):
        wait_until(lambda: synced(cluster, readable).is_final, timeout=20, interval=0.02)
        wait_until(lambda: synced(cluster, unreadable).is_final, timeout=20, interval=0.02)

    assert (readable.state, readable.passed, readable.log_error) == ("succeeded", True, "")
    assert unreadable.state == "succeeded" and unreadable.log_error.startswith("ctr0: 500")


def test_it_follows_claims_while_the_pod_list_fails(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = services.verification_run_start(user=alice, claim_request=claim)
    transition(run, to="pending", allowed=("queued",))  # a followed run: Pods are listed
    gateway = gateways.gateway_for(cluster)
    gateway.apply(stuck_pod(claim))
    with failing(kubesim_cluster, "/pods$", code=503):
        wait_until(lambda: synced(cluster, claim).state == "in_use", timeout=10, interval=0.02)
        run.refresh_from_db()
        last_error = Cluster.objects.get(pk=cluster.pk).last_error
    gateway.delete("v1", "Pod", claim.namespace, f"{claim.name}-user")

    assert claim.allocation["devices"]
    assert run.state == "pending"  # not failed as "gone": its Pod was not seen either way
    assert last_error.startswith("Pods: 503 ServiceUnavailable")


def test_it_follows_runs_while_the_claim_list_fails(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    [claim] = applied_claims(alice, cluster, 1)
    run = started_run(alice, claim)
    with failing(kubesim_cluster, "resourceclaims$"):
        wait_until(lambda: synced(cluster, run).is_final, timeout=20, interval=0.02)
        last_error = Cluster.objects.get(pk=cluster.pk).last_error

    assert (run.state, run.passed) == ("succeeded", True)
    assert last_error.startswith("ResourceClaims: 500 InternalError")
    sync.sync_cluster(cluster)
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""


def test_it_times_a_run_from_its_containers_when_running_was_never_seen(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    path = f"/api/v1/namespaces/{claim.namespace}/pods/{run.pod_name}"
    ended = [
        s["state"]["terminated"]
        for s in kubesim_cluster.admin("GET", path)["status"]["containerStatuses"]
    ]

    synced(cluster, run)

    assert run.state == "succeeded"
    assert run.started_at == parse_time(min(s["startedAt"] for s in ended))
    assert run.finished_at == parse_time(max(s["finishedAt"] for s in ended))


def test_unreadable_logs_are_asked_for_less_and_less_often() -> None:
    """Issue 23.1: a real API server that cannot reach a kubelet answered ~5 reads a second."""
    waits = [run_observations.log_backoff(n).total_seconds() for n in range(1, 10)]
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_logs_still_awaited_keep_the_loops_passes_coming_with_no_run_under_way(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    """With no other run under way, the loop passed only on changes: a finished run's logs
    were never asked for again although the page said they would be."""
    _, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    view = LiveView(gateways.gateway_for(cluster))
    with failing(kubesim_cluster, "/log$"):
        assert sync.sync_from(cluster, view)  # logs awaited: pass again later
    VerificationRun.objects.filter(pk=run.pk).update(next_log_read_at=timezone.now())
    assert not sync.sync_from(cluster, view)  # read: nothing left to follow
    assert synced(cluster, run).passed is True
