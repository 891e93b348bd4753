"""The approval queue in a real browser: an approver's own request says, before any click,
that another approver must approve it (four-eyes), and offers no Approve button."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from claims.domain import services
from claims.models import Cluster
from tests.e2e.conftest import log_in
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e


def test_it_tells_an_approver_before_a_click_who_must_approve_their_own_request(
    live_server: Any,
    open_page: Callable[[], Page],
    carol: User,
    alice: User,
    e2e_cluster: Cluster,
) -> None:
    own = services.namespace_request_submit(user=carol, cluster=e2e_cluster, name="carols-ml")
    services.namespace_request_submit(user=alice, cluster=e2e_cluster, name="alices-ml")
    page = open_page()
    log_in(page, live_server.url, "carol", PASSWORD)
    page.get_by_role("link", name="Approvals").click()
    row = page.locator(f"#namespace-request-{own.pk}")
    expect(row).to_contain_text("Your own request: another approver must approve it")
    expect(row).to_contain_text("No other approver exists yet")
    expect(row.get_by_role("button", name="Approve")).to_have_count(0)
    expect(row.get_by_role("button", name="Reject")).to_be_visible()
    alices = page.locator("tr[id^=namespace-request-]", has_text="alices-ml")
    expect(alices.get_by_role("button", name="Approve")).to_be_visible()
