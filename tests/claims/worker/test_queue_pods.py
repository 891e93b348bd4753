"""Verification runs and notebooks wait in the queue as Jobs do (issue 25.3): on a cluster whose
GPUs another team's Pods hold, their Pods are not created (a Pod has no suspend, and the
scheduler's retries would otherwise pick whoever it retries first); the run and the workload
read "waiting for a GPU" with their place. Sent again (a worker restarted mid-wait), they still
wait. When a GPU frees up the head's Pod is created, and the next one's once the head has its
devices."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from kubernetes import client

import kubesim
from claims.domain import services, state_messages
from claims.models import ClaimRequest, Cluster, VerificationRun, Workload
from claims.web.views.clusters import run_pending_context
from claims.worker import cluster_steps, queue_steps, sync, workload_steps
from tests.claims.worker.test_queue import (  # noqa: F401 (fixtures)
    CLASS,
    full,
    full_kubesim,
    page_text,
    spots,
    waiting_claim,
)
from tests.fixtures.kubesim import api_client
from tests.fixtures.portal import wait_until
from tests.fixtures.workloads import JUPYTER, seeded_profile

PODS = "/api/v1/namespaces/{ns}/pods"


def pods(handle: kubesim.Handle, claim: ClaimRequest) -> list[str]:
    items = handle.admin("GET", PODS.format(ns=claim.namespace))["items"]
    return [i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")]


def test_a_run_and_a_notebook_wait_uncreated_and_start_in_queue_order(
    alice: User,
    full: Cluster,  # noqa: F811
    full_kubesim: kubesim.Handle,  # noqa: F811
) -> None:
    # Each wants a whole node's 4 GPUs: the node the first hog frees fits the head only.
    older = waiting_claim(alice, full, "older", count=4)
    newer = waiting_claim(alice, full, "newer", count=4)
    started = services.verification_run_start(user=alice, claim_request=older)
    cluster_steps.start_run(VerificationRun.objects.get(pk=started.pk))
    run = VerificationRun.objects.get(pk=started.pk)
    notebook = services.workload_start(
        user=alice, claim_request=newer, profile=seeded_profile(JUPYTER)
    )
    workload_steps.start_workload(Workload.objects.get(pk=notebook.pk))
    notebook = Workload.objects.get(pk=notebook.pk)

    # Neither fits now: nothing of theirs is in the cluster, both read "waiting for a GPU".
    assert (run.state, run.pod_uid) == ("queued", "")
    assert run.state_message == state_messages.WAITS_ITS_TURN
    assert (notebook.state, notebook.suspended, notebook.kube_uid) == ("applying", True, "")
    assert notebook.state_message == state_messages.WAITS_ITS_TURN
    assert pods(full_kubesim, older) == [] and pods(full_kubesim, newer) == []
    found = spots(full)
    assert [found[c.pk].position for c in (older, newer)] == [1, 2]
    run_page = page_text(alice, reverse("run", args=[run.pk]))
    assert f"Waiting for a GPU : position 1 of 2 for {CLASS}" in run_page
    assert "its Pod is created when its claim's turn in the queue comes" in run_page
    # Why, as for a pending Pod (the page's why-pending part).
    assert [r.kind for r in run_pending_context(run, alice)["pending_reasons"]] == ["held"]
    workload_page = page_text(alice, reverse("workload", args=[notebook.pk]))
    assert f"Waiting for a GPU : position 2 of 2 for {CLASS}" in workload_page
    api = Client()
    api.force_login(alice)
    read_run = api.get(reverse("api-run", args=[run.pk])).json()
    assert (read_run["state"], read_run["queue"]["position"]) == ("queued", 1)
    read_notebook = api.get(reverse("api-workload", args=[notebook.pk])).json()
    assert (read_notebook["state"], read_notebook["queue"]["position"]) == ("applying", 2)
    assert read_notebook["queue"]["estimate"] == "unknown"

    # A worker restarted mid-wait: the reconciler sends them again, and they still wait.
    cluster_steps.start_run(run, resume=True)
    workload_steps.start_workload(notebook, resume=True)
    assert queue_steps.start_waiting(full) == []
    assert VerificationRun.objects.get(pk=run.pk).state == "queued"
    assert Workload.objects.get(pk=notebook.pk).suspended
    assert pods(full_kubesim, older) == [] and pods(full_kubesim, newer) == []

    core = client.CoreV1Api(api_client(full_kubesim))
    namespace = full_kubesim.hog_namespace  # type: ignore[attr-defined]
    core.delete_namespaced_pod("hog-1", namespace, grace_period_seconds=0)

    def head_started() -> bool:
        sync.refresh_inventory(full)
        queue_steps.start_waiting(Cluster.objects.get(pk=full.pk))
        return VerificationRun.objects.get(pk=run.pk).state != "queued"

    wait_until(head_started, timeout=30)
    assert api.get(reverse("api-run", args=[run.pk])).json()["queue"] is None
    assert pods(full_kubesim, older) == [VerificationRun.objects.get(pk=run.pk).pod_name]
    # The one behind waits until the head has its devices.
    assert Workload.objects.get(pk=notebook.pk).suspended
    assert pods(full_kubesim, newer) == []

    def next_started() -> Any:
        sync.sync_cluster(Cluster.objects.get(pk=full.pk))
        queue_steps.start_waiting(Cluster.objects.get(pk=full.pk))
        return not Workload.objects.get(pk=notebook.pk).suspended

    wait_until(next_started, timeout=30)
    notebook = Workload.objects.get(pk=notebook.pk)
    assert notebook.state in ("started", "running"), notebook.state_message
    assert notebook.name in pods(full_kubesim, newer)
