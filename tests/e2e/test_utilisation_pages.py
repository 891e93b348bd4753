"""The pages of GPU use in a real browser, with a real Prometheus scraping kubesim's
dcgm-exporters: the claim's chart of activity and memory with its idle warning, the month's
GPU-hours, the claims in use idle first; no serious accessibility violation; screenshots for
docs/ui.md."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from claims.models import AuditEvent, IdleWarning, Team, TeamMembership
from claims.read import utilisation
from tests.claims.read.test_utilisation import LONG_RUN, claim_row
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import log_in, screenshot
from tests.fixtures.kubesim import create_namespace, wait_until
from tests.fixtures.portal import PASSWORD
from tests.kubesim.test_dcgm_exporter import TRAIN_IMAGE, run_on_gpu

pytestmark = pytest.mark.e2e


def test_the_pages_of_gpu_use(
    transactional_db: None,
    kubesim_with_prometheus: Any,
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    carol: User,
    settings: Any,
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    handle = kubesim_with_prometheus[0]
    TeamMembership.objects.create(team=Team.objects.create(name="vision"), user=alice)
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.6"])
    claim = claim_row(alice, namespace, "train")
    AuditEvent.objects.create(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST,
        object_id=claim.pk,
        object_name=claim.name,
        to_state="in_use",
        allocation={"devices": [{"device": "gpu-0"}]},
        created=claim.applied_at,
    )
    IdleWarning.objects.create(
        claim=claim,
        deadline=timezone.now() + timedelta(hours=3),
        idle_since=claim.applied_at,
        threshold=0.05,
        window=timedelta(hours=4),
    )
    wait_until(lambda: len(utilisation.claim_usage(claim).points) > 3, timeout=120)

    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(live_server.url + reverse("claim", args=[claim.pk]))
    expect(page.locator("#usage-chart svg polyline")).to_have_count(2)
    expect(page.locator("#usage-chart figcaption")).to_contain_text("activity (solid line, 0-1)")
    expect(page.locator("#idle-warning")).to_contain_text("will be released at")
    assert_accessible(page)
    screenshot(page, "claim-usage-chart")

    approver = open_page()
    log_in(approver, live_server.url, "carol", PASSWORD)
    approver.goto(live_server.url + reverse("gpu-hours"))
    expect(approver.locator("#gpu-hours-users")).to_contain_text("alice")
    assert_accessible(approver)
    screenshot(approver, "gpu-hours")
    approver.click("#idle-claims-link")
    expect(approver.locator(f"#idle-claim-{claim.pk}")).to_contain_text("released at")
    assert_accessible(approver)
    screenshot(approver, "idle-claims")


def test_a_team_approver_sets_the_idle_reclaim_policy_in_the_browser(
    transactional_db: None,
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    bob: User,
) -> None:
    team = Team.objects.create(name="vision")
    TeamMembership.objects.create(team=team, user=alice)
    TeamMembership.objects.create(team=team, user=bob, role=TeamMembership.Role.APPROVER)
    page = open_page()
    log_in(page, live_server.url, "bob", PASSWORD)
    page.goto(live_server.url + reverse("teams"))
    form = page.locator(f"#idle-form-{team.pk}")
    page.click(f"#team-{team.pk} details summary")
    form.get_by_label("Reclaim idle claims").check()
    form.get_by_label("Idle at or below (GPU activity, 0-1)").fill("1.5")
    form.get_by_label("For (minutes)").fill("240")
    form.get_by_role("button", name="Save the idle reclaim policy").click()
    error = page.locator(f"#field-idle-{team.pk}-idle_threshold .errorlist")
    expect(error).to_contain_text("Give a GPU activity from 0 to 1")
    assert_accessible(page)
    screenshot(page, "team-idle-policy")
    form.get_by_label("Idle at or below (GPU activity, 0-1)").fill("0.05")
    form.get_by_role("button", name="Save the idle reclaim policy").click()
    policy = page.locator(f"#idle-policy-{team.pk}")
    expect(policy).to_contain_text("at or below 0.05 for 4 h 00 min")
