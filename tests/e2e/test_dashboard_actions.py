"""The dashboard's destructive action in a real browser: a button (POST) that leads to the
confirmation, by keyboard and without any script of ours; only the confirmation acts."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from tests.e2e.test_ui_pages import signed_in  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e


def test_it_withdraws_a_namespace_from_the_dashboard_only_after_confirming(
    signed_in: Any,  # noqa: F811
    live_server: Any,
    alice: User,
    e2e_cluster: Cluster,
) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=e2e_cluster, name="nlp-ml")
    page = signed_in("alice")
    withdraw = page.locator(f"#namespace-{ns.pk}").get_by_role("button", name="Withdraw nlp-ml")
    withdraw.focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("Withdraw the request for namespace nlp-ml?")
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "pending"
    page.get_by_role("button", name="Withdraw the request").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".messages")).to_contain_text("Namespace nlp-ml: Deleting it")
    assert NamespaceRequest.objects.get(pk=ns.pk).state == "deleted"
