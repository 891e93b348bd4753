"""A node whose kubelet the API server cannot reach (kubesim's node fault, as a real cluster
answers): a run whose log never came says its verdict is unknown and why; a release that
would delete such a Pod asks first; a release whose Pod stays Terminating says it waits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.kube.gateway import TransientKubeError
from claims.models import ClaimRequest, Cluster, VerificationRun
from claims.worker import cluster_steps, sync
from tests.claims.worker.test_sync import applied_claims, run_finished_unseen
from tests.fixtures.portal import register_cluster, wait_until


@contextmanager
def kubelet_down(handle: Any, nodes: list[str], mode: str = "down") -> Iterator[None]:
    for node in nodes:
        handle.admin("POST", "/_kubesim/faults", {"node": node, "kubelet": mode})
    try:
        yield
    finally:
        handle.admin("DELETE", "/_kubesim/faults")


def pod_node(handle: Any, namespace: str, pod: str) -> str:
    return handle.admin("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")["spec"]["nodeName"]


def unread_run(user: User, cluster: Cluster, handle: Any) -> tuple[ClaimRequest, VerificationRun]:
    """A run whose Pod succeeded while the portal could not read its log (kubelet down)."""
    claim, run = run_finished_unseen(user, cluster, handle)
    with kubelet_down(handle, [pod_node(handle, claim.namespace, run.pod_name)]):
        sync.sync_cluster(cluster)
    run.refresh_from_db()
    return claim, run


def test_a_run_whose_log_never_came_has_an_unknown_verdict_and_says_why(
    alice: User, cluster: Cluster, kubesim_cluster: Any, client: Client
) -> None:
    claim, run = run_finished_unseen(alice, cluster, kubesim_cluster)
    node = pod_node(kubesim_cluster, claim.namespace, run.pod_name)
    with kubelet_down(kubesim_cluster, [node]):
        sync.sync_cluster(cluster)
        run.refresh_from_db()
        assert (run.state, run.passed) == ("succeeded", None)
        assert "dial tcp" in run.log_error and "connect: connection refused" in run.log_error
        VerificationRun.objects.filter(pk=run.pk).update(
            log_retry_until=timezone.now() - timedelta(seconds=1),
            next_log_read_at=timezone.now(),
        )
        sync.sync_cluster(cluster)  # the back-off gives up
    run.refresh_from_db()
    assert run.log_retry_until is None and run.passed is None

    api = APIClient()
    api.force_authenticate(alice)
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["passed"] is None
    assert body["verdict"] == "unknown"
    assert body["verdict_reason"].startswith("the log could not be read: ctr0: ")
    assert f'Get "https://{node}:10250/containerLogs/{claim.namespace}/' in body["verdict_reason"]
    log = api.get(f"/api/v1/runs/{run.pk}/logs/ctr0/")
    assert log["X-Log-Complete"] == "false"

    client.force_login(alice)
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "Verdict unknown: the logs never came" in page
    assert "Verdict: unknown." in page
    assert "Why: the log could not be read: ctr0: " in page


def test_a_run_still_being_read_is_pending_not_unknown(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    _, run = unread_run(alice, cluster, kubesim_cluster)
    api = APIClient()
    api.force_authenticate(alice)
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["passed"], body["verdict"]) == (None, "pending")
    assert body["verdict_reason"].startswith("the log could not be read yet: ctr0: ")


def test_releasing_a_claim_whose_run_log_is_unread_warns_and_asks_for_force(
    alice: User, cluster: Cluster, kubesim_cluster: Any, client: Client
) -> None:
    claim, run = unread_run(alice, cluster, kubesim_cluster)
    client.force_login(alice)

    page = client.get(reverse("claim-release", args=[claim.pk])).content.decode()
    assert "log has not been read yet; releasing deletes its Pod and the log with it" in page
    assert run.pod_name in page
    # A POST that did not come from the confirmation asks first, and releases nothing.
    asked = client.post(reverse("claim-release", args=[claim.pk]))
    assert asked.status_code == 200 and "unread-log-warning" in asked.content.decode()
    assert ClaimRequest.objects.get(pk=claim.pk).state == "waiting"

    api = APIClient()
    api.force_authenticate(alice)
    refused = api.delete(f"/api/v1/claims/{claim.pk}/")
    assert refused.status_code == 409
    assert "has not been read yet; releasing deletes its Pod" in refused.json()["detail"]
    assert ClaimRequest.objects.get(pk=claim.pk).state == "waiting"
    assert api.delete(f"/api/v1/claims/{claim.pk}/?force=maybe").status_code == 400

    released = api.delete(f"/api/v1/claims/{claim.pk}/?force=true")
    assert released.status_code == 200 and released.json()["state"] == "released"


def test_the_confirmed_release_page_releases_despite_an_unread_log(
    alice: User, cluster: Cluster, kubesim_cluster: Any, client: Client
) -> None:
    claim, _ = unread_run(alice, cluster, kubesim_cluster)
    client.force_login(alice)
    client.post(reverse("claim-release", args=[claim.pk]), {"confirmed": "1"})
    assert ClaimRequest.objects.get(pk=claim.pk).state == "released"


@pytest.fixture
def private_cluster(db: None, kubesim_private: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(kubesim_private, name="private")
    gateways.forget_gateways()


def test_a_release_whose_pod_stays_terminating_on_a_dead_node_says_it_waits(
    alice: User, private_cluster: Cluster, kubesim_private: kubesim.Handle, client: Client
) -> None:
    [claim] = applied_claims(alice, private_cluster, 1)
    nodes = [n["metadata"]["name"] for n in kubesim_private.admin("GET", "/api/v1/nodes")["items"]]
    with kubelet_down(kubesim_private, nodes, mode="unreachable"):
        run = services.verification_run_start(user=alice, claim_request=claim)
        cluster_steps.start_run(run)
        run.refresh_from_db()
        wait_until(lambda: pod_node(kubesim_private, claim.namespace, run.pod_name))
        services.claim_request_release(user=alice, claim_request=claim)
        claim.refresh_from_db()

        with pytest.raises(TransientKubeError):
            cluster_steps.delete_claim(claim)

        claim.refresh_from_db()
        assert claim.state == "released" and claim.cleaned_up_at is None
        assert claim.state_message.startswith("Released; waiting for the node's kubelet: Pod ")
        assert run.pod_name in claim.state_message
        client.force_login(alice)
        page = client.get(reverse("claim", args=[claim.pk])).content.decode()
        assert "Released; waiting for the node" in page and run.pod_name in page

    # The kubelet is back: it confirms, the Pod goes, the claim is cleaned up.
    def cleaned() -> bool:
        try:
            cluster_steps.delete_claim(claim)
        except TransientKubeError:
            return False
        claim.refresh_from_db()
        return claim.cleaned_up_at is not None

    wait_until(cleaned, timeout=30, interval=0.5)
