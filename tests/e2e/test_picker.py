"""The device picker in a real browser: pick a model and a minimum memory, watch the
feasibility line and the generated CEL follow the typing, see an impossible count flagged next
to its field, and submit. axe-core finds no serious or critical violation on the form."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import Page, expect

from claims.domain import services
from claims.models import ClaimRequest, Cluster
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import log_in, screenshot
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e
H100 = "NVIDIA H100 80GB HBM3"


def feasible(what: str, free_in_cluster: int) -> re.Pattern[str]:
    """The form's one feasibility statement, for up to 4 `what` on one node. The e2e cluster
    is shared: another team's claim holds 2 of gpu-node-1's 4 H100s outside the portal."""
    return re.compile(
        rf"^Can be satisfied: up to 4 {re.escape(what)} on one node\. "
        rf"Free now: \d+ on [\w-]+, {free_in_cluster} in the cluster"
    )


OF_CLASS = "devices of class gpu.nvidia.com"
MATCHING = "devices of class gpu.nvidia.com matching the selector"


def pick_model(page: Page, line: Any, cel: Any) -> None:
    expect(page.locator("#gpu-model-options option")).to_have_count(2)
    page.locator("input[name=gpu_model]").press_sequentially(H100, delay=5)
    expect(line).to_have_text(feasible(MATCHING, 2))
    expect(line).to_contain_text("2 matching devices are held outside the portal")
    expect(cel).to_contain_text(f"device.attributes['gpu.nvidia.com'].productName == '{H100}'")


def pick_memory(page: Page, line: Any, cel: Any) -> None:
    page.fill("input[name=gpu_model]", "")
    expect(line).to_have_text(feasible(OF_CLASS, 6))
    page.locator("input[name=min_memory]").press_sequentially("60Gi", delay=5)
    expect(line).to_have_text(feasible(MATCHING, 2))
    expect(cel).to_contain_text("memory.compareTo(quantity('60Gi')) >= 0")
    expect(page.locator("#manifest-yaml")).to_contain_text("quantity('60Gi')")


def flag_impossible_count(page: Page) -> None:
    page.fill("input[name=count]", "999")
    expect(page.locator("#count-check")).to_have_text(
        "At most 4 devices of class gpu.nvidia.com matching the selector sit on one node; "
        "this cluster cannot give 999 to one claim."
    )
    expect(page.get_by_text("cannot give 999")).to_have_count(1)  # said once, by the count
    expect(page.locator("#manifest-yaml")).to_contain_text("count: 999")
    page.fill("input[name=count]", "2")
    expect(page.locator("#count-check")).to_be_empty()


def test_it_writes_the_cel_from_the_picks_and_says_what_matches(
    live_server: Any, open_page: Callable[[], Page], alice: User, e2e_cluster: Cluster
) -> None:
    namespace = services.namespace_request_submit(
        user=alice, cluster=e2e_cluster, name=f"pick-{uuid.uuid4().hex[:6]}"
    )
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(live_server.url + reverse("claim-request"))
    line, cel = page.locator("#feasibility-line"), page.locator("#generated-cel")
    expect(line).to_have_text(feasible(OF_CLASS, 6))
    page.fill("input[name=name]", "picked")

    pick_model(page, line, cel)
    pick_memory(page, line, cel)
    flag_impossible_count(page)
    assert_accessible(page)
    screenshot(page, "claim-picker")
    page.get_by_role("button", name="Submit for approval").click()

    expect(page.locator("h1")).to_contain_text("picked")
    claim = ClaimRequest.objects.get(namespace_request=namespace, name="picked")
    assert (claim.gpu_model, claim.min_memory, claim.count) == ("", "60Gi", 2)
    assert claim.selector.endswith("memory.compareTo(quantity('60Gi')) >= 0")
    assert claim.dry_run_note == ""


A100 = "NVIDIA A100-SXM4-40GB"


def test_it_adds_an_alternative_and_says_which_one_fits_now(
    live_server: Any, open_page: Callable[[], Page], alice: User, e2e_cluster: Cluster
) -> None:
    namespace = services.namespace_request_submit(
        user=alice, cluster=e2e_cluster, name=f"alt-{uuid.uuid4().hex[:6]}"
    )
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(live_server.url + reverse("claim-request"))
    page.fill("input[name=name]", "h100-else-a100")
    page.fill("input[name=gpu_model]", H100)
    page.fill("input[name=count]", "4")
    second, third = page.locator("#alternative-2"), page.locator("#alternative-3")
    expect(page.locator("select[name=alt2_device_class]")).to_be_hidden()
    expect(third).to_be_hidden()  # one row at a time

    second.get_by_text("Add an alternative").click()
    expect(third.get_by_text("Add another alternative")).to_be_visible()
    page.select_option("select[name=alt2_device_class]", "gpu.nvidia.com")
    page.fill("input[name=alt2_gpu_model]", A100)
    page.fill("input[name=alt2_count]", "4")

    # Another team holds 2 of gpu-node-1's 4 H100s: the A100s are what fits now.
    expect(page.locator("#first-fitting")).to_have_text(
        f"The first that fits now: alternative 2 ({A100})."
    )
    expect(page.locator("#alternatives-feasibility li")).to_have_count(2)
    expect(page.locator("#manifest-yaml")).to_contain_text("firstAvailable:")
    expect(page.locator("#manifest-yaml")).to_contain_text("name: a100")
    assert_accessible(page)
    screenshot(page, "claim-alternatives")
    # From the keyboard: a click's press and release can straddle the preview that leaving
    # the count field starts, and the release then misses the moved button.
    page.get_by_role("button", name="Submit for approval").focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("h100-else-a100")
    expect(page.locator("#claim-alternatives")).to_contain_text(A100)
    claim = ClaimRequest.objects.get(namespace_request=namespace, name="h100-else-a100")
    assert [alt["gpu_model"] for alt in claim.alternatives()] == [H100, A100]
