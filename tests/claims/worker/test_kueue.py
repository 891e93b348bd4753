"""Kueue where the cluster runs it (issue 25.4), against a kubesim that serves Kueue's API
and a test playing Kueue's controller (tests/fixtures/kueue.py): the portal finds Kueue in
discovery, submits its Jobs suspended to the team's LocalQueue, leaves them to Kueue, and
shows what Kueue says: pending with its words and position, then admitted and running."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, Team, TeamMembership, Workload
from claims.worker import cluster_loop, cluster_steps, queue_steps, sync, workload_steps
from kubesim.registry.kinds.kueue import served_groups
from tests.claims.worker.test_cluster_loop import start_follower
from tests.fixtures.kueue import (
    PENDING_MESSAGE,
    PlayedKueue,
    kueue_cluster,
    kueue_topology,
    make_queues,
)
from tests.fixtures.portal import register_cluster, wait_until
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

__all__ = ["kueue_cluster"]
JOB = "/apis/batch/v1/namespaces/{ns}/jobs/{name}"
CONFIG = "/api/v1/namespaces/kueue-system/configmaps"
TRAIN_SIM = "ghcr.io/gpu-portal/train-sim:1.0"


@pytest.fixture
def kueue_portal(db: None, kueue_cluster: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kueue_cluster, name="with-kueue")
    gateways.forget_gateways()


def waiting_claim(user: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"kq-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=user, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    transition(ns, to="approved", allowed=("pending",))
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim = ClaimRequest.objects.get(pk=claim.pk)
    assert claim.state == "waiting", claim.state_message
    return claim


def started_job(user: User, claim: ClaimRequest, **spec: str) -> Workload:
    if spec:
        spec = {"image": TRAIN_SIM, "command": "train-sim", **spec}
    workload = services.workload_start(
        user=user, claim_request=claim, profile=seeded_profile(BATCH), **spec
    )
    workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
    return Workload.objects.get(pk=workload.pk)


def page_text(user: User, url: str) -> str:
    web = Client()
    web.force_login(user)
    response = web.get(url)
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


def synced(cluster: Cluster, workload: Workload, **expected: Any) -> bool:
    sync.sync_cluster(Cluster.objects.get(pk=cluster.pk))
    row = Workload.objects.get(pk=workload.pk)
    return all(getattr(row, key) == value for key, value in expected.items())


def test_discovery_finds_kueue_and_its_visibility_api(carol: User, kueue_portal: Cluster) -> None:
    assert (kueue_portal.kueue, kueue_portal.kueue_visibility) == (True, True)
    text = page_text(carol, reverse("cluster", args=[kueue_portal.pk]))
    assert "Kueue queues the jobs; positions from its visibility API" in text


def test_a_job_waits_for_kueue_in_the_teams_local_queue_then_runs_when_admitted(
    alice: User, kueue_portal: Cluster, kueue_cluster: kubesim.Handle
) -> None:
    team = Team.objects.create(name="vision", kueue_local_queue="vision-queue")
    TeamMembership.objects.create(team=team, user=alice)
    claim = waiting_claim(alice, kueue_portal)
    make_queues(kueue_cluster, claim.namespace, local_queue="vision-queue")
    with PlayedKueue(kueue_cluster) as kueue:
        first, second = started_job(alice, claim), started_job(alice, claim)
        job = kueue_cluster.admin("GET", JOB.format(ns=claim.namespace, name=first.name))
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "vision-queue"
        assert job["spec"]["suspend"] is True
        assert first.kueue_queue == "vision-queue" and not first.suspended

        # Kueue has them both, pending in FIFO order: the pages say so, in Kueue's words. Two
        # Workloads made in one second tie on their creationTimestamp, and Kueue's heap orders
        # ties as it likes: which one is ahead is read, not assumed.
        wait_until(lambda: synced(kueue_portal, first, kueue_state="pending"), timeout=30)

        def positions() -> list[int | None]:
            sync.sync_cluster(Cluster.objects.get(pk=kueue_portal.pk))
            return [Workload.objects.get(pk=w.pk).kueue_position for w in (first, second)]

        wait_until(lambda: sorted(p or 0 for p in positions()) == [1, 2], timeout=30)
        if positions() == [2, 1]:
            first, second = second, first
        assert queue_steps.start_waiting(kueue_portal) == []  # the portal stands back
        text = page_text(alice, reverse("workload", args=[second.pk]))
        assert "pending in Kueue · position 2 in LocalQueue vision-queue" in text
        assert PENDING_MESSAGE in text
        claim_page = page_text(alice, reverse("claim", args=[claim.pk]))
        assert "position 1 in LocalQueue vision-queue" in claim_page
        job = kueue_cluster.admin("GET", JOB.format(ns=claim.namespace, name=first.name))
        assert job["spec"]["suspend"] is True and not job["status"].get("active")

        kueue.admit(claim.namespace, first.name)
        wait_until(lambda: synced(kueue_portal, first, kueue_state="admitted"), timeout=30)
        wait_until(lambda: synced(kueue_portal, second, kueue_position=1), timeout=30)
        assert "admitted by Kueue" in page_text(alice, reverse("workload", args=[first.pk]))
        wait_until(lambda: synced(kueue_portal, first, state="succeeded"), timeout=60)
        assert kueue.errors == []

    api = APIClient()
    api.force_authenticate(alice)
    shown = api.get(reverse("api-workload", args=[second.pk])).json()["kueue"]
    assert shown == {
        "local_queue": "vision-queue",
        "state": "pending",
        "message": PENDING_MESSAGE,
        "position": 1,
    }


def test_an_evicted_job_says_so_and_a_team_without_a_queue_uses_the_default(
    alice: User, kueue_portal: Cluster, kueue_cluster: kubesim.Handle, settings: Any
) -> None:
    settings.KUEUE_LOCAL_QUEUE = "shared"
    claim = waiting_claim(alice, kueue_portal)
    make_queues(kueue_cluster, claim.namespace, local_queue="shared")
    with PlayedKueue(kueue_cluster) as kueue:
        job = started_job(alice, claim, args="--steps 600 --step-seconds 1")  # long enough
        assert job.kueue_queue == "shared"
        wait_until(lambda: kueue.workload_of(claim.namespace, job.name), timeout=30)
        kueue.pend(claim.namespace, job.name, "LocalQueue shared is stopped")
        wait_until(
            lambda: synced(kueue_portal, job, kueue_message="LocalQueue shared is stopped"),
            timeout=30,
        )
        kueue.admit(claim.namespace, job.name)
        kueue.evict(claim.namespace, job.name, "Preempted to accommodate a higher priority")
        wait_until(lambda: synced(kueue_portal, job, kueue_state="evicted"), timeout=30)
        text = page_text(alice, reverse("workload", args=[job.pk]))
        assert "evicted by Kueue · Preempted to accommodate a higher priority" in text


def test_preflight_checks_the_queues_and_the_dra_mapping(
    kueue_portal: Cluster, kueue_cluster: kubesim.Handle
) -> None:
    gateway = gateways.gateway_for(kueue_portal)
    namespace = f"pf-{uuid.uuid4().hex[:6]}"
    kueue_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    make_queues(kueue_cluster, namespace, local_queue="pf", cluster_queue="team-a")

    def kueue_checks() -> dict[str, tuple[bool, str]]:
        return {c.name: (c.ok, c.detail) for c in gateway.preflight() if "Kueue" in c.name}

    checks = kueue_checks()
    assert checks["Kueue queues"][0] is True
    assert "team-a" in checks["Kueue queues"][1]
    ok, detail = checks["Kueue DRA mapping"]
    assert not ok and detail.startswith("cannot check: Kueue's Configuration")

    # Kueue's Configuration maps the cluster's one class, gpu.nvidia.com, to `gpus`: covered.
    kueue_cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "kueue-system"}})
    config = "resources:\n  deviceClassMappings:\n  - name: %s\n    deviceClassNames: [%s]\n"
    data = {"controller_manager_config.yaml": config % ("gpus", "gpu.nvidia.com")}
    body = {"metadata": {"name": "kueue-manager-config"}, "data": data}
    kueue_cluster.admin("POST", CONFIG, body)
    ok, detail = kueue_checks()["Kueue DRA mapping"]
    assert ok, detail
    assert detail == "Kueue counts gpu.nvidia.com, and the ClusterQueues cover them"

    data["controller_manager_config.yaml"] = config % ("example.com/gpu", "gpu.nvidia.com")
    kueue_cluster.admin("PUT", f"{CONFIG}/kueue-manager-config", body)
    ok, detail = kueue_checks()["Kueue DRA mapping"]
    assert not ok and "ClusterQueue team-a does not cover example.com/gpu" in detail

    data["controller_manager_config.yaml"] = config % ("gpus", "another.example.com")
    kueue_cluster.admin("PUT", f"{CONFIG}/kueue-manager-config", body)
    ok, detail = kueue_checks()["Kueue DRA mapping"]
    assert (ok, detail) == (False, "gpu.nvidia.com is not in Kueue's deviceClassMappings")


@pytest.mark.django_db(transaction=True)
def test_the_loop_follows_kueues_word_from_its_watch(
    alice: User, kueue_cluster: kubesim.Handle
) -> None:
    """No sync by hand: the loop's watch of Kueue's Workloads brings each change."""
    cluster = register_cluster(kueue_cluster, name="kueue-loop")
    claim = waiting_claim(alice, cluster)
    make_queues(kueue_cluster, claim.namespace)
    loop, stop = start_follower(cluster)
    try:
        with PlayedKueue(kueue_cluster) as kueue:
            job = started_job(alice, claim)
            # Kueue makes the Workload, then says why it waits: both come by the watch.
            wait_until(lambda: row(job).kueue_message == PENDING_MESSAGE, timeout=60)
            assert loop.watched.kueue_workloads is not None
            assert (row(job).kueue_state, row(job).kueue_position) == ("pending", 1)
            kueue.admit(claim.namespace, job.name)
            wait_until(lambda: row(job).kueue_state == "admitted", timeout=60)
            wait_until(lambda: row(job).state == "succeeded", timeout=60)
    finally:
        stop()
        gateways.forget_gateways()


@pytest.mark.django_db(transaction=True)
def test_the_loop_watches_kueues_workloads_once_discovery_finds_kueue(
    kubesim_private: kubesim.Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_loop, "DISCOVERY_SECONDS", 0.5)
    cluster = register_cluster(kubesim_private, name="kueue-later")
    loop, stop = start_follower(cluster)
    try:
        wait_until(lambda: loop.watched is not None and loop.passes + loop.checks >= 0, 30)
        assert loop.watched.kueue_workloads is None
        kubesim_private.api.optional_groups = served_groups({})  # Kueue installed meanwhile
        wait_until(lambda: loop.watched.kueue_workloads is not None, timeout=30)
        assert Cluster.objects.get(pk=cluster.pk).kueue
    finally:
        stop()
        gateways.forget_gateways()


def row(workload: Workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def test_without_the_visibility_api_a_job_is_queued_by_kueue_without_a_position(
    alice: User, db: None
) -> None:
    with kubesim.start(speed=20, topology=kueue_topology(visibility=False)) as handle:
        cluster = register_cluster(handle, name="no-visibility")
        try:
            assert (cluster.kueue, cluster.kueue_visibility) == (True, False)
            claim = waiting_claim(alice, cluster)
            make_queues(handle, claim.namespace)
            with PlayedKueue(handle):
                job = started_job(alice, claim)
                wait_until(lambda: synced(cluster, job, kueue_message=PENDING_MESSAGE), 30)
            assert row(job).kueue_position is None
            text = page_text(alice, reverse("workload", args=[job.pk]))
            assert "pending in Kueue · queued by Kueue in LocalQueue default" in text
            assert Cluster.objects.get(pk=cluster.pk).last_error == ""
        finally:
            gateways.forget_gateways()


def test_a_notebooks_pod_is_labelled_for_kueue_and_shown_only_once_kueue_takes_it(
    alice: User, kueue_portal: Cluster, kueue_cluster: kubesim.Handle
) -> None:
    """Kueue queues a bare Pod only with its pod integration, whose webhook gates it; kubesim
    runs no webhook, so the Pod starts, and the page says nothing of Kueue."""
    claim = waiting_claim(alice, kueue_portal)
    notebook = services.workload_start(
        user=alice, claim_request=claim, profile=seeded_profile(JUPYTER)
    )
    workload_steps.start_workload(Workload.objects.get(pk=notebook.pk))
    notebook = row(notebook)
    pod = kueue_cluster.admin("GET", f"/api/v1/namespaces/{claim.namespace}/pods/{notebook.name}")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert (notebook.kueue_queue, notebook.kueue_state) == ("default", "")
    wait_until(lambda: synced(kueue_portal, notebook, state="running"), timeout=60)
    assert "Kueue" not in page_text(alice, reverse("workload", args=[notebook.pk]))


def test_the_form_previews_the_job_kueue_will_get(
    alice: User, kueue_portal: Cluster, kueue_cluster: kubesim.Handle
) -> None:
    claim = waiting_claim(alice, kueue_portal)
    web = Client()
    web.force_login(alice)
    response = web.post(
        reverse("workload-preview", args=[claim.pk]), {"profile": seeded_profile(BATCH).pk}
    )
    text = html.unescape(
        re.search(r'<pre id="manifest-yaml">(.*?)</pre>', response.content.decode(), re.S)[1]
    )
    [job] = yaml.safe_load_all(text)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert job["spec"]["suspend"] is True
