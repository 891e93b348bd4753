"""A claim's page (live allocation, runs, manifests, actions) and a verification run's page."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from claims.domain import observations, run_observations, services
from claims.kube import manifests
from claims.models import ClaimRequest, VerificationRun
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for, h100, htmx_client_for, poll_url

VECTOR_ADD_LOG = "[Vector addition of 50000 elements]\nTest PASSED\nDone\n"
DEVICE_QUERY_LOG = (
    'Device 0: "NVIDIA H100 80GB HBM3"\n'
    "  CUDA Capability Major/Minor version number:    9.0\n"
    "  Total amount of global memory:                 81090 MBytes (85029158912 bytes)\n"
    "Result = PASS\n"
)


@pytest.fixture
def applied(claim: ClaimRequest, charlie: User) -> ClaimRequest:
    """Approved and created in the cluster, no Pod uses it yet."""
    services.claim_request_approve(user=charlie, claim_request=claim)
    manifest = manifests.resource_claim_manifest(
        api_version="v1",
        namespace="alice-ml",
        name=claim.name,
        device_class=claim.device_class,
        count=1,
        labels=claim.labels(),
    )
    observations.claim_applying(claim_request=claim)
    observations.claim_applied(claim_request=claim, api_version="v1", manifest=manifest)
    return claim


def allocation() -> dict[str, Any]:
    """As the sync describes it: the ResourceSlice's device under "device", not "name"."""
    device = h100(0)
    device["device"] = device.pop("name")
    return {
        "node": "gpu-node-1",
        "devices": [{"request": "gpu", **device}],
        "reserved_for": ["alice-ml/train-gpu-verify-1"],
    }


@pytest.fixture
def run(applied: ClaimRequest) -> VerificationRun:
    return services.verification_run_start(user=applied.owner, claim_request=applied)


def finish(run: VerificationRun) -> None:
    now = datetime.now(UTC)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_pod_observed(
        run=run, phase="Running", node="gpu-node-1", devices=allocation()["devices"]
    )
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, VECTOR_ADD_LOG)])
    run_observations.run_logs_appended(run=run, container="ctr1", lines=[(now, DEVICE_QUERY_LOG)])
    run_observations.run_finished(run=run, phase="Succeeded")


def test_it_sends_anonymous_visitors_to_login(claim: ClaimRequest) -> None:
    for url in (reverse("claim", args=[claim.pk]), reverse("claim-verify", args=[claim.pk])):
        response = client_for(None).get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_hides_a_claim_from_other_users(claim: ClaimRequest, bob: User) -> None:
    client = client_for(bob)
    assert client.get(reverse("claim", args=[claim.pk])).status_code == 404
    assert client.post(reverse("claim-release", args=[claim.pk])).status_code == 404
    assert client.post(reverse("claim-verify", args=[claim.pk])).status_code == 404
    claim.refresh_from_db()
    assert claim.state == "pending"


def test_it_shows_an_approver_any_claim(claim: ClaimRequest, charlie: User) -> None:
    assert client_for(charlie).get(reverse("claim", args=[claim.pk])).status_code == 200


def test_it_shows_a_pending_claim_with_its_timeline(claim: ClaimRequest) -> None:
    content = client_for(claim.owner).get(reverse("claim", args=[claim.pk])).content.decode()
    assert "state-pending" in content
    assert "waits for an approver" in content
    assert "Requested." in content
    assert "Run CUDA verification" not in content


def test_it_shows_the_planned_manifests_and_kubectl_command(claim: ClaimRequest) -> None:
    content = client_for(claim.owner).get(reverse("claim", args=[claim.pk])).content.decode()
    assert "Manifests applied after approval" in content
    assert (
        "kubectl apply --server-side --field-manager=gpu-portal -f - &lt;&lt;&#x27;EOF&#x27;"
        in content
    )
    assert "kind: Namespace" in content
    assert "kind: ResourceClaim" in content
    assert "resourceClaimName: train-gpu" in content


def test_it_says_plainly_that_an_unused_claim_holds_no_gpu(applied: ClaimRequest) -> None:
    content = client_for(applied.owner).get(reverse("claim", args=[applied.pk])).content.decode()
    assert "state-waiting" in content
    assert "No Pod uses this claim right now, so DRA holds no GPU for it." in content
    assert "Applied manifests" in content
    assert "Run CUDA verification" in content


def test_it_shows_the_allocation_while_a_pod_uses_the_claim(applied: ClaimRequest) -> None:
    observations.claim_allocation_seen(claim_request=applied, allocation=allocation())
    content = client_for(applied.owner).get(reverse("claim", args=[applied.pk])).content.decode()
    assert "state-in_use" in content
    assert '<strong id="allocation-node">gpu-node-1</strong>' in content
    assert "NVIDIA H100 80GB HBM3" in content
    assert "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd" in content
    assert "80Gi" in content
    assert "DRA holds no GPU" not in content


def test_it_watches_the_claim_until_it_is_final(applied: ClaimRequest) -> None:
    page = client_for(applied.owner).get(reverse("claim", args=[applied.pk])).content.decode()
    services.claim_request_release(user=applied.owner, claim_request=applied)
    response = htmx_client_for(applied.owner).get(poll_url(page))
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<div id="claim-watch"></div>')  # final: no more waits
    assert '<div class="card" id="claim-status" hx-swap-oob="true">' in content
    assert "state-released" in content
    assert 'id="claim-timeline"' in content
    assert 'id="claim-runs"' not in content  # unchanged parts are left alone


def test_it_releases_a_claim(applied: ClaimRequest) -> None:
    url = reverse("claim-release", args=[applied.pk])
    response = client_for(applied.owner).post(url, follow=True)
    assert "Claim released." in response.content.decode()
    applied.refresh_from_db()
    assert applied.state == "released"


def test_it_explains_why_a_rejected_claim_cannot_run(claim: ClaimRequest, charlie: User) -> None:
    services.claim_request_reject(user=charlie, claim_request=claim, reason="No")
    url = reverse("claim-verify", args=[claim.pk])
    response = client_for(claim.owner).post(url, follow=True)
    assert "The claim is rejected; a run needs a claim that is requested" in (
        response.content.decode()
    )
    assert not VerificationRun.objects.exists()


def test_it_starts_a_verification_run_and_opens_its_page(applied: ClaimRequest) -> None:
    response = client_for(applied.owner).post(reverse("claim-verify", args=[applied.pk]))
    run = VerificationRun.objects.get()
    assert response["Location"] == reverse("run", args=[run.pk])
    assert run.state == "queued"


def test_it_refuses_a_second_run_while_one_is_going(run: VerificationRun) -> None:
    url = reverse("claim-verify", args=[run.claim.pk])
    response = client_for(run.owner).post(url, follow=True)
    assert "still going" in response.content.decode()
    assert VerificationRun.objects.count() == 1


def test_it_offers_a_retry_for_a_failed_claim(applied: ClaimRequest) -> None:
    message = 'admission webhook "quota" denied the request'
    observations.claim_failed(claim_request=applied, message=message)
    client = client_for(applied.owner)
    content = client.get(reverse("claim", args=[applied.pk])).content.decode()
    assert "quota&quot; denied the request" in content
    assert reverse("claim-retry", args=[applied.pk]) in content
    client.post(reverse("claim-retry", args=[applied.pk]))
    applied.refresh_from_db()
    assert applied.state == "approved"


def test_it_hides_a_run_from_other_users(run: VerificationRun, bob: User) -> None:
    assert client_for(bob).get(reverse("run", args=[run.pk])).status_code == 404


def test_it_shows_a_queued_run_waiting_for_its_logs(run: VerificationRun) -> None:
    content = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    assert "state-queued" in content
    assert 'id="log-ctr0">(no output yet)' in content
    assert 'id="log-ctr1">(no output yet)' in content
    assert '<div id="run-watch" hx-get=' in content


def test_it_shows_the_logs_and_the_parsed_result(run: VerificationRun) -> None:
    finish(run)
    content = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    assert '<div id="run-watch"></div>' in content
    assert "Test PASSED" in content
    assert "Result = PASS" in content
    assert '<dd id="run-device-name">NVIDIA H100 80GB HBM3</dd>' in content
    assert "<dd>9.0</dd>" in content
    assert "81090 MiB" in content
    assert '<span class="result ok">PASS</span>' in content


def test_it_lists_the_devices_each_past_run_got(run: VerificationRun) -> None:
    finish(run)
    observations.claim_allocation_seen(claim_request=run.claim, allocation=None)
    url = reverse("claim", args=[run.claim.pk])
    content = client_for(run.owner).get(url).content.decode()
    assert f'<tr id="run-{run.pk}">' in content
    assert "<code>gpu-0</code> NVIDIA H100 80GB HBM3" in content


def test_it_shows_the_applied_manifest_in_the_usual_key_order(applied: ClaimRequest) -> None:
    content = client_for(applied.owner).get(reverse("claim", args=[applied.pk])).content.decode()
    command = content[content.index('id="kubectl-apply"') :]
    claim_part = command[command.index("kind: ResourceClaim") - 40 :]
    positions = [
        claim_part.index(text)
        for text in ("apiVersion: resource.k8s.io/v1", "kind:", "metadata:", "spec:", "EOF")
    ]
    assert positions == sorted(positions)


def test_it_gives_a_kubectl_command_whose_manifests_validate(applied: ClaimRequest) -> None:
    content = client_for(applied.owner).get(reverse("claim", args=[applied.pk])).content.decode()
    found = re.search(r'<pre id="kubectl-apply"[^>]*>(.*?)</pre>', content, re.S)
    assert found
    command = html.unescape(found[1])
    first_line, *body, last_line = command.splitlines()
    assert first_line.endswith("-f - <<'EOF'")
    assert last_line == "EOF"
    namespace, claim = yaml.safe_load_all("\n".join(body))
    assert (namespace["kind"], claim["kind"]) == ("Namespace", "ResourceClaim")
    for manifest in (namespace, claim):
        kubernetes_validate.validate(manifest, "1.34", strict=True)


def test_it_says_when_a_runs_device_was_named_by_device_query(run: VerificationRun) -> None:
    now = datetime.now(UTC)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, VECTOR_ADD_LOG)])
    run_observations.run_logs_appended(run=run, container="ctr1", lines=[(now, DEVICE_QUERY_LOG)])
    run_observations.run_finished(run=run, phase="Succeeded")

    content = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    assert "named by deviceQuery" in content
    assert "pool </" not in content and "<code></code>" not in content
    claim_page = client_for(run.owner).get(reverse("claim", args=[run.claim.pk]))
    assert 'NVIDIA H100 80GB HBM3 <span class="muted">(named by deviceQuery)' in (
        claim_page.content.decode()
    )


def test_it_offers_to_cancel_a_run_while_it_is_going(run: VerificationRun) -> None:
    content = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    cancel = reverse("run-cancel", args=[run.pk])
    assert f'<a class="button danger" href="{cancel}" id="cancel-run">Cancel run…</a>' in content


def test_it_asks_before_cancelling_a_run(run: VerificationRun) -> None:
    url = reverse("run-cancel", args=[run.pk])
    content = client_for(run.owner).get(url).content.decode()
    form = re.search(rf'<form method="post" action="{url}">(.*?)</form>', content, re.S)
    assert form and "csrfmiddlewaretoken" in form.group(1)
    assert ">Cancel the run</button>" in form.group(1)
    assert "The run ends without a verdict" in content
    run.refresh_from_db()
    assert run.state == "queued"  # the GET changed nothing


def test_it_cancels_a_run_and_says_so(run: VerificationRun) -> None:
    url = reverse("run-cancel", args=[run.pk])
    response = client_for(run.owner).post(url, follow=True)
    assert response.redirect_chain == [(reverse("run", args=[run.pk]), 302)]
    content = response.content.decode()
    assert "Run cancelled; its Pod is being deleted, which frees the GPU." in content
    assert "Cancelled by alice." in content
    assert "Cancel run" not in content
    run.refresh_from_db()
    assert run.state == "failed"


def test_it_lets_an_approver_cancel_a_run(run: VerificationRun, charlie: User) -> None:
    client_for(charlie).post(reverse("run-cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.state_message == "Cancelled by charlie."


def test_it_keeps_others_from_cancelling_a_run(run: VerificationRun, bob: User) -> None:
    url = reverse("run-cancel", args=[run.pk])
    assert client_for(bob).post(url).status_code == 404
    assert client_for(bob).get(url).status_code == 404
    assert client_for(None).post(url)["Location"].startswith(reverse("login"))
    run.refresh_from_db()
    assert run.state == "queued"


def test_it_needs_the_csrf_token_to_cancel(run: VerificationRun) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(run.owner)
    assert client.post(reverse("run-cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert run.state == "queued"


def test_it_explains_that_an_ended_run_cannot_be_cancelled(run: VerificationRun) -> None:
    finish(run)
    content = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    assert "Cancel run" not in content
    url = reverse("run-cancel", args=[run.pk])
    response = client_for(run.owner).post(url, follow=True)
    assert "The run already ended (succeeded): nothing to cancel." in response.content.decode()
