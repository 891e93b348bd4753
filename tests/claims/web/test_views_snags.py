"""The snags of issue 11, each with the words a user saw before: confirmations before
destructive actions, wording, the run page (verdict on top, elapsed time, phases), the
namespace page (claims, runs, access, copy buttons), the API docs' way back, quiet logs."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from claims.domain import services
from claims.models import ClaimRequest, NamespaceRequest, VerificationRun
from portal import logfilters
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for
from tests.claims.web.test_views_claims import applied, finish, run  # noqa: F401 (fixtures)
from tests.claims.web.test_views_namespaces import active  # noqa: F401 (fixture)


def get(user: User, name: str, *args: object) -> str:
    response = client_for(user).get(reverse(name, args=list(args)))
    assert response.status_code == 200
    return response.content.decode()


def confirm_form(content: str, url: str) -> str:
    form = re.search(rf'<form method="post" action="{url}">(.*?)</form>', content, re.S)
    assert form and "csrfmiddlewaretoken" in form.group(1)
    return form.group(1)


# Confirmations: a GET says what goes, only the POST from it acts.


def test_it_lists_what_deleting_a_namespace_takes_with_it(
    active: NamespaceRequest,  # noqa: F811
    claim: ClaimRequest,
) -> None:
    url = reverse("namespace-delete", args=[active.pk])
    content = get(active.owner, "namespace-delete", active.pk)
    assert "Delete namespace <code>alice-ml</code>?" in content
    assert re.search(r'id="doomed-claims">.*train-gpu', content, re.S)
    assert ">Delete alice-ml</button>" in confirm_form(content, url)
    active.refresh_from_db()
    assert active.state == "active"  # the GET deleted nothing


def test_it_lists_the_runs_a_namespace_deletion_stops(
    active: NamespaceRequest,  # noqa: F811
    run: VerificationRun,  # noqa: F811
) -> None:
    content = get(active.owner, "namespace-delete", active.pk)
    assert re.search(rf'id="doomed-runs">.*href="/runs/{run.pk}/"', content, re.S)


def test_it_deletes_the_namespace_only_on_the_confirming_post(
    active: NamespaceRequest,  # noqa: F811
) -> None:
    url = reverse("namespace-delete", args=[active.pk])
    response = client_for(active.owner).post(url, {"confirmed": "yes"}, follow=True)
    assert "Deleting it, with the claims in it." in response.content.decode()
    active.refresh_from_db()
    assert active.state == "deleting"


def test_it_links_the_namespace_page_to_the_confirmation(
    active: NamespaceRequest,  # noqa: F811
) -> None:
    url = reverse("namespace-delete", args=[active.pk])
    assert f'href="{url}" id="delete-namespace">Delete namespace…' in get(
        active.owner, "namespace", active.pk
    )


def test_it_withdraws_from_the_dashboard_by_a_button_that_asks_first(
    namespace: NamespaceRequest,
) -> None:
    """The dashboard's Withdraw was a link; an action that changes state is a button in a
    form (POST), and without JavaScript it still asks before it acts."""
    url = reverse("namespace-delete", args=[namespace.pk])
    dashboard = get(namespace.owner, "dashboard")
    assert f'<a href="{url}"' not in dashboard
    button = confirm_form(dashboard, url)
    assert '>Withdraw<span class="visually-hidden"> alice-ml</span>…</button>' in button
    assert 'name="confirmed"' not in button
    asked = client_for(namespace.owner).post(url)
    assert asked.status_code == 200
    content = asked.content.decode()
    assert "Withdraw the request for namespace <code>alice-ml</code>?" in content
    namespace.refresh_from_db()
    assert namespace.state == "pending"  # the dashboard's POST only asked
    assert '<input type="hidden" name="confirmed" value="yes">' in confirm_form(content, url)
    client_for(namespace.owner).post(url, {"confirmed": "yes"})
    namespace.refresh_from_db()
    assert namespace.state == "deleted"


def test_it_says_a_pending_namespace_is_withdrawn(namespace: NamespaceRequest) -> None:
    content = get(namespace.owner, "namespace-delete", namespace.pk)
    assert "Nothing exists in the cluster yet: the request is withdrawn" in content


def test_it_hides_the_confirmation_from_other_users(
    namespace: NamespaceRequest, claim: ClaimRequest, bob: User
) -> None:
    assert client_for(bob).get(reverse("namespace-delete", args=[namespace.pk])).status_code == 404
    assert client_for(bob).get(reverse("claim-release", args=[claim.pk])).status_code == 404


def test_it_asks_before_releasing_a_claim(applied: ClaimRequest) -> None:  # noqa: F811
    url = reverse("claim-release", args=[applied.pk])
    claim_page = get(applied.owner, "claim", applied.pk)
    assert f'href="{url}" id="release-claim">Release claim…</a>' in claim_page
    content = get(applied.owner, "claim-release", applied.pk)
    assert "The ResourceClaim <code>train-gpu</code> is deleted" in content
    assert ">Release train-gpu</button>" in confirm_form(content, url)
    applied.refresh_from_db()
    assert applied.state == "waiting"
    client_for(applied.owner).post(url)
    applied.refresh_from_db()
    assert applied.state == "released"


def test_it_asks_before_revoking_a_token(alice: User) -> None:
    token, _ = AuthToken.objects.create(user=alice, expiry=None)
    url = reverse("api-token-revoke")
    listing = get(alice, "api-tokens")
    assert f'href="{url}?token_key={token.token_key}"' in listing
    content = client_for(alice).get(url, {"token_key": token.token_key}).content.decode()
    assert "can no longer call the API" in content
    assert f'value="{token.token_key}"' in confirm_form(content, url)
    assert AuthToken.objects.filter(pk=token.pk).exists()
    client_for(alice).post(url, {"token_key": token.token_key})
    assert not AuthToken.objects.filter(pk=token.pk).exists()


def test_it_shows_no_one_elses_token_to_revoke(alice: User, bob: User) -> None:
    token, _ = AuthToken.objects.create(user=alice, expiry=None)
    url = reverse("api-token-revoke")
    assert client_for(bob).get(url, {"token_key": token.token_key}).status_code == 404


# Wording


def test_it_calls_an_unused_claim_ready(applied: ClaimRequest) -> None:  # noqa: F811
    content = get(applied.owner, "claim", applied.pk)
    assert '<span class="badge ok state-waiting">ready · not in use</span>' in content
    assert ">waiting<" not in content


def test_it_offers_no_pod_snippet_for_a_rejected_claim(claim: ClaimRequest, charlie: User) -> None:
    services.claim_request_reject(user=charlie, claim_request=claim, reason="Use the A100s")
    content = get(claim.owner, "claim", claim.pk)
    assert "Use it in your own Pod" not in content
    assert 'id="pod-snippet"' not in content
    assert "The claim is rejected: Use the A100s." in content


def test_it_shows_the_rejection_reason_on_the_dashboard(claim: ClaimRequest, charlie: User) -> None:
    services.claim_request_reject(user=charlie, claim_request=claim, reason="Use the A100s")
    content = get(claim.owner, "dashboard")
    row = re.search(rf'<tr id="claim-{claim.pk}">(.*?)</tr>', content, re.S)
    assert row and "Use the A100s" in row.group(1)


def test_it_says_just_now_instead_of_zero_minutes(namespace: NamespaceRequest) -> None:
    content = get(namespace.owner, "dashboard")
    assert "just now" in content
    assert "0\xa0minutes ago" not in content and "0 minutes ago" not in content
    with time_machine.travel(timezone.now() + timedelta(minutes=3)):
        assert "3\xa0minutes ago" in get(namespace.owner, "dashboard")


def test_it_renders_no_stray_label_for_the_hidden_token(alice: User, cluster: object) -> None:
    content = get(alice, "namespace-request")
    assert "Submission token" not in content
    assert 'type="hidden" name="submission_token"' in content


def test_it_says_a_cancelled_run_has_no_verdict(run: VerificationRun) -> None:  # noqa: F811
    services.verification_run_cancel(user=run.owner, run=run)
    content = get(run.owner, "run", run.pk)
    assert "not yet known" not in content
    assert "No verdict" in content and "Cancelled by alice." in content


def test_it_opens_the_run_page_without_seed_jargon(run: VerificationRun) -> None:  # noqa: F811
    content = get(run.owner, "run", run.pk)
    assert not re.search(r"\b(seed|pod1)\b", content)  # as words: a CSRF token may hold them
    assert "really works" in content


# The run page: verdict on top, elapsed time, phases


def test_it_puts_the_verdict_with_its_figures_above_the_logs(
    run: VerificationRun,  # noqa: F811
) -> None:
    finish(run)
    content = get(run.owner, "run", run.pk)
    verdict = content.index('id="run-verdict"')
    assert verdict < content.index('id="log-ctr0"')
    assert '<h2 id="run-verdict"><span class="result ok">PASS</span></h2>' in content
    figures = content[verdict : content.index('id="log-ctr0"')]
    assert "NVIDIA H100 80GB HBM3" in figures and "9.0" in figures and "MiB" in figures


def test_it_shows_the_time_a_finished_run_took(run: VerificationRun) -> None:  # noqa: F811
    finish(run)
    run.refresh_from_db()
    VerificationRun.objects.filter(pk=run.pk).update(
        started_at=run.finished_at - timedelta(seconds=75)
    )
    content = get(run.owner, "run", run.pk)
    assert 'took <strong id="run-elapsed">1 min 15 s</strong>' in content


def test_it_ticks_the_elapsed_time_of_a_running_run(run: VerificationRun) -> None:  # noqa: F811
    started = timezone.now() - timedelta(seconds=42)
    VerificationRun.objects.filter(pk=run.pk).update(state="running", started_at=started)
    content = get(run.owner, "run", run.pk)
    clock = re.search(
        r'running for <strong id="run-elapsed" data-elapsed-since="([^"]+)">', content
    )
    assert clock and clock.group(1) == started.isoformat()


def test_it_lists_the_phases_with_timestamps(run: VerificationRun) -> None:  # noqa: F811
    finish(run)
    content = get(run.owner, "run", run.pk)
    phases = re.search(r'<ol class="timeline" id="run-phases">(.*?)</ol>', content, re.S)
    assert phases
    states = re.findall(r"state-(\w+)", phases.group(1))
    assert states == ["queued", "creating", "pending", "running", "succeeded"]
    assert len(re.findall(r"<time datetime=", phases.group(1))) == len(states)


# The namespace page


def test_it_lists_the_namespaces_runs_with_links(
    active: NamespaceRequest,  # noqa: F811
    run: VerificationRun,  # noqa: F811
) -> None:
    content = get(active.owner, "namespace", active.pk)
    runs = re.search(r'id="namespace-runs"(.*?)</section>', content, re.S)
    assert runs and f'href="/runs/{run.pk}/"' in runs.group(1)
    assert f'href="/claims/{run.claim_id}/"' in runs.group(1)


def test_it_offers_copy_buttons_for_commands_and_manifests(
    active: NamespaceRequest,  # noqa: F811
    applied: ClaimRequest,  # noqa: F811
) -> None:
    assert 'data-copy="kubectl-lines"' in get(active.owner, "namespace", active.pk)
    claim_page = get(applied.owner, "claim", applied.pk)
    assert 'data-copy="pod-snippet"' in claim_page
    assert 'data-copy="kubectl-apply"' in claim_page


def test_it_links_the_api_docs_back_to_the_portal(alice: User) -> None:
    content = get(alice, "api-docs")
    assert '<a href="/" style="color: #2f5fb3; font-weight: 600;">← Back to the GPU portal</a>' in (
        content
    )


# Quiet logs


def server_record(line: str, status: int) -> logging.LogRecord:
    """An access-log line as runserver writes it."""
    record = logging.LogRecord("django.server", logging.INFO, "", 0, '"%s" %s %s', None, None)
    record.args = (line, str(status), "12")
    record.status_code = status
    return record


@pytest.mark.parametrize(
    "line",
    [
        "GET /claims/3/?since=1&status=ab HTTP/1.1",
        "GET /?seen=abc HTTP/1.1",
        "GET /api/v1/claims/3/?wait=30&state=pending HTTP/1.1",
    ],
)
def test_it_leaves_live_waits_out_of_the_access_log(line: str) -> None:
    assert not logfilters.quiet_live_waits(server_record(line, 200))
    assert logfilters.quiet_live_waits(server_record(line, 500))


def test_it_keeps_ordinary_requests_in_the_access_log() -> None:
    assert logfilters.quiet_live_waits(server_record("GET /claims/3/ HTTP/1.1", 200))


def test_it_logs_a_403_in_one_line_without_traceback(
    bob: User, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client_for(bob).get(reverse("approvals")).status_code == 403
    forbidden = [record for record in caplog.records if record.name == "django.request"]
    assert forbidden and all(record.exc_info is None for record in forbidden)


def test_it_shows_a_run_without_recorded_phases(applied: ClaimRequest) -> None:  # noqa: F811
    bare = VerificationRun.objects.create(
        owner=applied.owner, claim=applied, state=VerificationRun.State.RUNNING
    )
    assert 'id="run-phases">' in get(bare.owner, "run", bare.pk)


def test_it_offers_a_copy_button_for_a_new_token(alice: User) -> None:
    response = client_for(alice).post(reverse("api-token-create"), {"expires_in": "30"})
    content = response.content.decode()
    assert 'id="new-token-secret"' in content
    assert 'data-copy="new-token-secret"' in content
