"""Live pages in a real browser: a change behind the page shows without a reload, log panes
grow by appending, and what the user focused or selected survives the updates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from claims.domain import observations, run_observations
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from tests.e2e.conftest import log_in
from tests.e2e.test_flow import LIVE, assert_not_reloaded, mark_page
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e


@pytest.fixture
def running(alice: User, e2e_cluster: Cluster) -> VerificationRun:
    """A run whose Pod runs: made in the database, no worker behind it to change it."""
    ns = NamespaceRequest.objects.create(
        owner=alice, cluster=e2e_cluster, name="live-ml", state=NamespaceRequest.State.ACTIVE
    )
    claim = ClaimRequest.objects.create(
        owner=alice,
        namespace_request=ns,
        name="live-gpu",
        device_class="gpu.nvidia.com",
        count=1,
        state=ClaimRequest.State.IN_USE,
    )
    return VerificationRun.objects.create(
        owner=alice, claim=claim, pod_name="live-gpu-verify-1", state=VerificationRun.State.RUNNING
    )


def log_line(run: VerificationRun, text: str) -> None:
    now = datetime.now(UTC)
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, text + "\n")])


def focus_and_select(page: Page) -> None:
    """Focus the Cancel link, select the other pane's text, and tag both elements."""
    page.get_by_role("link", name="Cancel run…").focus()
    page.evaluate(
        """() => {
            document.activeElement.dataset.tagged = "focus";
            const pane = document.querySelector("#log-ctr1");
            pane.dataset.tagged = "selection";
            const range = document.createRange();
            range.selectNodeContents(pane);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
            document.querySelector("#log-ctr0").dataset.tagged = "log";
        }"""
    )


def survivors(page: Page) -> dict[str, Any]:
    return page.evaluate(
        """() => ({
            focused: document.activeElement.dataset.tagged || null,
            selected: getSelection().toString(),
            selectionInPage: getSelection().anchorNode !== null
                && getSelection().anchorNode.isConnected,
            logKept: document.querySelector("#log-ctr0").dataset.tagged || null,
        })"""
    )


def test_it_shows_changes_without_reload_and_keeps_focus_and_selection(
    live_server: Any, open_page: Callable[[], Page], running: VerificationRun
) -> None:
    log_line(running, "first line")
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(f"{live_server.url}/runs/{running.pk}/")
    expect(page.locator("#log-ctr0")).to_have_text("first line\n")
    mark_page(page)
    focus_and_select(page)

    log_line(running, "second line")
    expect(page.locator("#log-ctr0")).to_have_text("first line\nsecond line\n", timeout=LIVE)
    log_line(running, "third line")
    expect(page.locator("#log-ctr0")).to_contain_text("third line", timeout=LIVE)

    assert survivors(page) == {
        "focused": "focus",
        "selected": "(no output yet)",
        "selectionInPage": True,
        "logKept": "log",  # the pane grew in place: appended, not replaced
    }
    assert_not_reloaded(page)


def test_it_follows_a_claim_page_to_a_new_state(
    live_server: Any, open_page: Callable[[], Page], running: VerificationRun
) -> None:
    claim = running.claim
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(f"{live_server.url}/claims/{claim.pk}/")
    expect(page.locator("#claim-status")).to_contain_text("in use")
    mark_page(page)
    run_observations.run_finished(run=running, phase="Failed")
    expect(page.locator(f"#run-{running.pk}")).to_contain_text("failed", timeout=LIVE)
    observations.claim_failed(claim_request=claim, message="Deleted outside the portal.")
    expect(page.locator("#claim-status")).to_contain_text("Deleted outside", timeout=LIVE)
    assert_not_reloaded(page)
