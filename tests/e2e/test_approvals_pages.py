"""The approval queue's pages and filters in a real browser, with the keyboard: the next and
previous page links, the filters as a plain form, and a bad value said next to its field."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team
from claims.policy import limits
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import log_in
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e
SIZE = limits.APPROVALS_PAGE_SIZE


@pytest.fixture
def queue(alice: User, e2e_cluster: Cluster) -> Team:
    """A page and a half of alice's pending claims (team vision), the oldest a day old."""
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    ns = NamespaceRequest.objects.create(owner=alice, cluster=e2e_cluster, name="vision-ml")
    start = timezone.now() - timedelta(days=1)
    ClaimRequest.objects.bulk_create(
        ClaimRequest(
            namespace_request=ns,
            owner=alice,
            name=f"q{i:02d}",
            device_class="gpu.nvidia.com",
            created=start + timedelta(minutes=i),
        )
        for i in range(SIZE + SIZE // 2)
    )
    return team


def press_on(page: Page, name: str, role: Any = "link") -> None:
    """Focus the control by its accessible name, as Tab would reach it, and press Enter."""
    page.get_by_role(role, name=name).focus()
    page.keyboard.press("Enter")


def test_it_pages_the_queue_with_the_keyboard(
    live_server: Any, open_page: Callable[[], Page], carol: User, queue: Team
) -> None:
    page = open_page()
    log_in(page, live_server.url, "carol", PASSWORD)
    page.goto(live_server.url + "/approvals/?kind=claim")
    claims = page.locator("#claim-queue")
    expect(claims).to_contain_text("q00")
    expect(claims.locator("tbody tr")).to_have_count(SIZE)
    pages = page.get_by_role("navigation", name="Pages of GPU claim requests")
    expect(pages.get_by_role("link", name="Previous page (older requests)")).to_have_count(0)
    assert_accessible(page)
    press_on(page, "Next page (newer requests)")
    expect(claims.locator("tbody tr")).to_have_count(SIZE // 2)
    expect(claims).to_contain_text(f"q{SIZE:02d}")
    expect(claims).not_to_contain_text("q00")
    assert "kind=claim" in page.url and "claim_after=" in page.url
    press_on(page, "Previous page (older requests)")
    expect(claims).to_contain_text("q00")
    expect(claims.locator("tbody tr")).to_have_count(SIZE)


def test_it_filters_the_queue_and_says_a_bad_value_next_to_its_field(
    live_server: Any, open_page: Callable[[], Page], carol: User, queue: Team
) -> None:
    page = open_page()
    log_in(page, live_server.url, "carol", PASSWORD)
    page.goto(live_server.url + "/approvals/")
    page.get_by_label("Team").select_option(label="vision")
    page.get_by_label("Waiting at least (hours)").fill("48")
    press_on(page, "Filter", role="button")
    expect(page.locator("#claim-queue")).to_contain_text("No claim requests waiting.")
    page.goto(live_server.url + "/approvals/?older_than=soon")
    field = page.locator("#filter-older_than")
    expect(field).to_contain_text("Enter a whole number.")
    expect(page.locator("#claim-queue")).to_contain_text("q00")
    assert_accessible(page)
