"""Hebrew in a real browser: the header's switcher turns the pages right to left and
translated, a field error speaks Hebrew, and the choice follows the user to a browser that
asks for English once they sign in again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import Page, expect

from claims.domain import services
from claims.models import Cluster, Profile
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_ui_pages import active_namespace, ready_claim
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e


def assert_hebrew(page: Page) -> None:
    html = page.locator("html")
    expect(html).to_have_attribute("lang", "he")
    expect(html).to_have_attribute("dir", "rtl")


def test_it_speaks_hebrew_right_to_left_once_chosen(
    live_server: Any,
    open_page: Callable[[], Page],
    e2e_cluster: Cluster,
    alice: User,
    carol: User,
) -> None:
    claim = ready_claim(active_namespace(alice, carol, e2e_cluster), carol, "train-gpu")
    base = live_server.url
    page = open_page()
    log_in(page, base, "alice", PASSWORD)
    expect(page.locator("html")).to_have_attribute("dir", "ltr")
    expect(page.locator("h1")).to_have_text("My GPU work")

    page.get_by_role("button", name="עברית").click()
    assert_hebrew(page)
    expect(page.locator("h1")).to_have_text("עבודת ה-GPU שלי")
    expect(page.get_by_role("link", name="בקשת GPU claim")).to_be_visible()
    expect(page.locator(f"#claim-{claim.pk} .badge")).to_have_text("מוכן · לא בשימוש")
    assert Profile.objects.get(user=alice).language == "he"
    # Right to left for real: the brand sits at the right edge, the menu to its left.
    brand = page.locator("header .brand").bounding_box()
    assert brand is not None and brand["x"] > 1280 / 2
    assert_accessible(page)
    screenshot(page, "hebrew-dashboard")

    page.goto(base + reverse("claim-request"))
    assert_hebrew(page)
    expect(page.locator("label[for=id_name]")).to_have_text("שם ה-claim")

    page.goto(base + reverse("claim", args=[claim.pk]))
    assert_hebrew(page)
    expect(page.locator("#claim-status")).to_contain_text("מצב:")
    assert_accessible(page)

    page.goto(base + reverse("namespace-request"))
    page.fill("input[name=name]", "Vision_ML")
    page.get_by_role("button", name="בקשת namespace").click()
    expect(page.locator("#field-name .errorlist")).to_have_text("יש להשתמש באותיות קטנות בלבד.")
    assert_hebrew(page)


def test_it_keeps_the_choice_across_logout_and_another_browser(
    live_server: Any, open_page: Callable[[], Page], e2e_cluster: Cluster, alice: User
) -> None:
    base = live_server.url
    page = open_page()
    log_in(page, base, "alice", PASSWORD)
    page.get_by_role("button", name="עברית").click()
    assert_hebrew(page)
    page.get_by_role("button", name="התנתקות").click()
    page.wait_for_url(f"{base}{reverse('login')}")

    # A browser with no cookie of ours that asks for English: English until she signs in.
    elsewhere = open_page()
    elsewhere.set_extra_http_headers({"Accept-Language": "en-US,en;q=0.9"})
    elsewhere.goto(base + reverse("login"))
    expect(elsewhere.locator("html")).to_have_attribute("lang", "en")
    log_in(elsewhere, base, "alice", PASSWORD)
    assert_hebrew(elsewhere)
    expect(elsewhere.locator("h1")).to_have_text("עבודת ה-GPU שלי")

    elsewhere.get_by_role("button", name="English").click()
    expect(elsewhere.locator("html")).to_have_attribute("dir", "ltr")
    assert Profile.objects.get(user=alice).language == "en"


def test_it_decides_in_hebrew_in_the_live_approval_queue(
    live_server: Any,
    open_page: Callable[[], Page],
    e2e_cluster: Cluster,
    alice: User,
    carol: User,
) -> None:
    ns = active_namespace(alice, carol, e2e_cluster)
    claims = [
        services.claim_request_submit(
            user=alice, namespace_request=ns, name=name, device_class="gpu.nvidia.com"
        )
        for name in ("eval-gpu", "spare-gpu")
    ]
    Profile.objects.create(user=carol, language="he")
    page = open_page()
    log_in(page, live_server.url, "carol", PASSWORD)
    page.goto(live_server.url + reverse("approvals"))
    assert_hebrew(page)
    expect(page.locator("h1")).to_have_text("תור אישורים")
    assert_accessible(page)

    # htmx swaps the decided rows in place, in Hebrew too.
    first = page.locator(f"#claim-request-{claims[0].pk}")
    first.get_by_role("button", name="אישור").click()
    expect(first).to_contain_text("אושר")
    expect(first).to_contain_text("על ידי carol")
    second = page.locator(f"#claim-request-{claims[1].pk}")
    second.get_by_role("button", name="דחייה").click()
    expect(second.locator(".errorlist")).to_have_text("יש לנמק, כדי שמגיש הבקשה יידע מה לשנות.")
