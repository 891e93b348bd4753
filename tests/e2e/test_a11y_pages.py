"""axe-core on the pages tests/e2e/test_ui_pages.py does not reach: the run-cancel and
token-revoke confirmations, the audit trail (as an approver), the teams page, the profile
(notifications, in English and after switching the language), the API docs, and starting a
workload (its form with the live preview, its page, the profiles page).

No serious or critical violation may be found; see tests/e2e/a11y.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth.models import User
from django.urls import reverse
from knox.models import AuthToken
from playwright.sync_api import Page, expect

from claims.domain import run_observations, services
from claims.models import (
    ApprovalRule,
    ClaimRequest,
    Cluster,
    Team,
    TeamMembership,
    TeamQuota,
    VerificationRun,
)
from tests.e2e.a11y import FAILING_IMPACTS, assert_accessible, describe
from tests.e2e.conftest import log_in
from tests.e2e.test_ui_pages import active_namespace, passed_run, ready_claim
from tests.fixtures.portal import PASSWORD
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

pytestmark = pytest.mark.e2e
_AXE = Axe()


@pytest.fixture
def pages(alice: User, carol: User, e2e_cluster: Cluster) -> dict[str, Any]:
    """alice in a team with a quota and a rule, a passed run (audit rows with a result), a run
    whose Pod is pending (cancellable), and an API token."""
    team = Team.objects.create(name="vision")
    TeamMembership.objects.create(team=team, user=alice)
    TeamMembership.objects.create(team=team, user=carol, role=TeamMembership.Role.APPROVER)
    TeamQuota.objects.create(
        team=team,
        cluster=e2e_cluster,
        device_class="gpu.nvidia.com",
        max_devices=4,
        max_lifetime=timedelta(days=7),
    )
    ns = active_namespace(alice, carol, e2e_cluster)
    passed_run(ready_claim(ns, carol, "train-gpu"))
    claim = ready_claim(ns, carol, "cancel-gpu")
    run = services.verification_run_start(user=alice, claim_request=claim)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run, uid="pod-uid-1")
    run.refresh_from_db()
    assert run.state == VerificationRun.State.PENDING
    ApprovalRule.objects.create(name="one-gpu", team=team, max_devices=1)  # after: it approves
    token, _secret = AuthToken.objects.create(user=alice, expiry=None)
    return {"run": run, "token": token}


@pytest.fixture
def signed_in(live_server: Any, open_page: Callable[[], Page]) -> Callable[[str], Page]:
    def sign_in(username: str) -> Page:
        page = open_page()
        log_in(page, live_server.url, username, PASSWORD)
        return page

    return sign_in


def test_the_confirmations_teams_and_audit_trail_have_no_serious_violations(
    live_server: Any, signed_in: Any, pages: dict[str, Any]
) -> None:
    base = live_server.url
    page = signed_in("alice")
    page.goto(base + reverse("run-cancel", args=[pages["run"].pk]))
    expect(page.get_by_role("button", name="Cancel the run")).to_be_visible()
    assert_accessible(page)
    page.goto(base + reverse("api-token-revoke") + f"?token_key={pages['token'].token_key}")
    expect(page.get_by_role("button", name="Revoke the token")).to_be_visible()
    assert_accessible(page)
    page.goto(base + reverse("teams"))
    expect(page.locator("table.team-quotas")).to_contain_text("gpu.nvidia.com")
    expect(page.locator("#approval-rules")).to_contain_text("one-gpu")
    assert_accessible(page)
    approver = signed_in("carol")
    approver.goto(base + reverse("audit"))
    expect(approver.locator("#audit-events")).to_contain_text("train-gpu")
    assert_accessible(approver)
    approver.locator("#audit-events details").first.locator("summary").click()  # opened
    assert_accessible(approver)
    approver.goto(base + reverse("audit") + "?actor=nobody")  # the empty table
    expect(approver.locator("#audit-events")).to_contain_text("No action matches.")
    assert_accessible(approver)


def test_the_profile_has_no_serious_violations_in_either_language(
    live_server: Any, signed_in: Any, pages: dict[str, Any]
) -> None:
    page = signed_in("alice")
    page.goto(live_server.url + reverse("profile"))
    expect(page.locator("#notifications-form input[type=checkbox]").first).to_be_visible()
    assert_accessible(page)
    page.locator("form.languages button[lang=he]").click()
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    assert page.url.endswith(reverse("profile"))
    assert_accessible(page)
    page.locator("#notifications-form button[type=submit]").click()  # saved: its message
    expect(page.locator(".messages li.success")).to_be_visible()
    assert_accessible(page)


def test_the_api_docs_have_no_serious_violations_in_the_portals_part(
    live_server: Any, signed_in: Any, pages: dict[str, Any]
) -> None:
    page = signed_in("alice")
    page.goto(live_server.url + reverse("api-docs"))
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible()
    assert_portals_part_accessible(page)
    page.locator("#portal-back a").first.click()  # back, to switch the language
    page.locator("form.languages button[lang=he]").click()
    page.goto(live_server.url + reverse("api-docs"))
    expect(page.locator("html")).to_have_attribute("lang", "he")
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible()
    assert_portals_part_accessible(page)


def assert_portals_part_accessible(page: Page) -> None:
    """axe on the API docs without #swagger-ui: Swagger UI's own markup (its version badges and
    URL in low contrast, a link inside each operation's toggle button) is not ours to fix.
    What stays is the document (its lang, title) and the portal's header with the way back."""
    options = {"resultTypes": ["violations"]}
    results = _AXE.run(page, context={"exclude": [["#swagger-ui"]]}, options=options)
    found = [v for v in results.response["violations"] if v["impact"] in FAILING_IMPACTS]
    assert not found, f"accessibility violations on {page.url}:\n" + describe(found)


def test_the_workload_pages_have_no_serious_violations(
    live_server: Any, signed_in: Any, pages: dict[str, Any]
) -> None:
    """Starting a batch job from the claim page: the live preview (a command that does not
    parse is said there), the workload's page, and the profiles page."""
    seeded_profile(BATCH)
    seeded_profile(JUPYTER)
    claim = ClaimRequest.objects.get(name="train-gpu")
    base = live_server.url
    page = signed_in("alice")
    page.goto(base + reverse("claim", args=[claim.pk]))
    page.locator("#start-workload").click()
    expect(page.locator("#manifest-yaml")).to_contain_text("kind: Job")
    page.locator("#id_command").fill("python -c 'oops")
    expect(page.locator("#manifest-preview")).to_contain_text("does not parse as shell words")
    assert_accessible(page)
    page.locator("#id_command").fill("python train.py")
    expect(page.locator("#manifest-yaml")).to_contain_text("- train.py")
    page.get_by_role("button", name="Start", exact=True).click()
    expect(page.locator("#workload-status")).to_be_visible()
    assert_accessible(page)
    page.goto(base + reverse("workload-profiles"))
    expect(page.locator("#workload-profiles")).to_contain_text(JUPYTER)
    assert_accessible(page)
