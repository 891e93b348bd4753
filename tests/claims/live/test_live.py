"""Live parts: the watcher waits for a change, answers with what changed, appends log lines."""

from __future__ import annotations

import html
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test.utils import override_settings
from django.urls import reverse

from claims.domain import run_observations
from claims.live import changes
from claims.models import VerificationRun
from tests.claims.web import test_views_claims
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for, htmx_client_for, poll_url

applied = test_views_claims.applied
run = test_views_claims.run


def append(run: VerificationRun, text: str) -> None:
    now = datetime.now(UTC)
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, text)])


def run_page(run: VerificationRun) -> str:
    return client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()


def test_it_appends_only_the_new_log_lines(run: VerificationRun) -> None:
    append(run, "first line\n")
    page = run_page(run)
    assert 'id="log-ctr0">first line\n</pre>' in page
    append(run, "second <line>\n")
    content = htmx_client_for(run.owner).get(poll_url(page)).content.decode()
    assert '<div hx-swap-oob="beforeend:#log-ctr0">second &lt;line&gt;\n</div>' in content
    assert "first line" not in content
    assert 'id="log-ctr1-pane"' not in content  # the other pane did not change
    assert "log-ctr0=n25" in html.unescape(poll_url(content))


def test_it_replaces_a_pane_whose_start_was_dropped(run: VerificationRun) -> None:
    append(run, "first line\n")
    page = run_page(run)
    with override_settings(RUN_LOG_MAX_BYTES=20):
        append(run, "a much longer second line\n")
    content = htmx_client_for(run.owner).get(poll_url(page)).content.decode()
    assert '<section class="card" id="log-ctr0-pane" hx-swap-oob="true">' in content
    assert "Earlier lines were dropped" in content


@override_settings(LIVE_WAIT_SECONDS=0.2)
def test_it_answers_a_quiet_wait_with_the_same_watcher(run: VerificationRun) -> None:
    page = run_page(run)
    content = htmx_client_for(run.owner).get(poll_url(page)).content.decode()
    assert content.startswith('<div id="run-watch" hx-get=')
    assert poll_url(content) == poll_url(page)
    assert 'hx-trigger="load delay:0s' in content
    assert "hx-swap-oob" not in content  # nothing re-rendered


@override_settings(LIVE_WAIT_SECONDS=0.2)
def test_a_quiet_wait_reads_the_runs_version_once(
    run: VerificationRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 open pages each wait about once a minute: one look each, after subscribing."""
    page = run_page(run)
    looks: list[int] = []
    version = changes.run_version
    monkeypatch.setattr(changes, "run_version", lambda pk: looks.append(pk) or version(pk))
    htmx_client_for(run.owner).get(poll_url(page))
    assert looks == [run.pk]


@override_settings(LIVE_WAITERS_PER_USER=0)
def test_it_answers_a_change_at_once_even_past_the_bound(run: VerificationRun) -> None:
    page = run_page(run)
    append(run, "first line\n")
    content = htmx_client_for(run.owner).get(poll_url(page)).content.decode()
    assert "first line" in content


@override_settings(LIVE_WAITERS_PER_USER=0)
def test_it_answers_at_once_past_the_bound_and_asks_again_later(run: VerificationRun) -> None:
    page = run_page(run)
    content = htmx_client_for(run.owner).get(poll_url(page)).content.decode()
    assert 'hx-trigger="load delay:5s' in content
    assert poll_url(content) == poll_url(page)


def test_it_keeps_the_waiting_to_those_who_may_see_the_run(run: VerificationRun, bob: User) -> None:
    page = run_page(run)
    assert htmx_client_for(bob).get(poll_url(page)).status_code == 404
