"""Every page in a real browser: axe-core finds no serious or critical accessibility
violation, the approval queue is live, confirmations and copy buttons work by keyboard.

The data is made through the services and observations (no worker): the pages are what is
tested here, the flow itself is tests/e2e/test_flow.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import Page, expect

from claims.domain import observations, run_observations, services
from claims.kube import manifests
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_flow import LIVE, assert_not_reloaded, mark_page
from tests.fixtures.portal import PASSWORD

pytestmark = pytest.mark.e2e

VECTOR_ADD = (
    "[Vector addition of 50000 elements]\nCopy input data from the host memory\nTest PASSED\nDone\n"
)
DEVICE_QUERY = (
    'Device 0: "NVIDIA H100 80GB HBM3"\n'
    "  CUDA Capability Major/Minor version number:    9.0\n"
    "  Total amount of global memory:                 81090 MBytes (85029158912 bytes)\n"
    "Result = PASS\n"
)
# Console errors and htmx's error events, recorded from the first script on each page.
WATCH_ERRORS = """
window.__htmxErrors = [];
for (const name of ["htmx:oobErrorNoTarget", "htmx:targetError", "htmx:swapError",
                    "htmx:responseError"]) {
  document.addEventListener(name, (event) => {
    const content = event.detail.content;
    window.__htmxErrors.push(name + (content && content.id ? " #" + content.id : ""));
  });
}
"""


def active_namespace(owner: User, approver: User, cluster: Cluster) -> NamespaceRequest:
    ns = services.namespace_request_submit(user=owner, cluster=cluster, name="vision-ml")
    services.namespace_request_approve(user=approver, namespace_request=ns)
    observations.namespace_applied(namespace_request=ns, uid="uid-1")
    observations.namespace_access_granted(namespace_request=ns)
    ns.refresh_from_db()
    return ns


def ready_claim(ns: NamespaceRequest, approver: User, name: str) -> ClaimRequest:
    claim = services.claim_request_submit(
        user=ns.owner,
        namespace_request=ns,
        name=name,
        device_class="gpu.nvidia.com",
        count=1,
        purpose="Fine-tuning",
    )
    services.claim_request_approve(user=approver, claim_request=claim)
    observations.claim_applying(claim_request=claim)
    manifest = manifests.resource_claim_manifest(
        api_version="v1",
        namespace=ns.name,
        name=name,
        device_class=claim.device_class,
        count=1,
        labels=claim.labels(),
    )
    observations.claim_applied(claim_request=claim, api_version="v1", manifest=manifest)
    claim.refresh_from_db()
    return claim


def passed_run(claim: ClaimRequest) -> VerificationRun:
    run = services.verification_run_start(user=claim.owner, claim_request=claim)
    now = datetime.now(UTC)
    run_observations.run_creating(run=run)
    run_observations.run_pod_created(run=run)
    run_observations.run_pod_observed(run=run, phase="Running", node="gpu-node-1", devices=[])
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, VECTOR_ADD)])
    run_observations.run_logs_appended(run=run, container="ctr1", lines=[(now, DEVICE_QUERY)])
    run_observations.run_finished(run=run, phase="Succeeded")
    VerificationRun.objects.filter(pk=run.pk).update(started_at=now - timedelta(seconds=7))
    run.refresh_from_db()
    return run


@pytest.fixture
def work(alice: User, carol: User, e2e_cluster: Cluster) -> dict[str, Any]:
    """alice's active namespace with a ready claim that passed a run, a rejected claim, and a
    namespace and a claim waiting for an approver."""
    ns = active_namespace(alice, carol, e2e_cluster)
    claim = ready_claim(ns, carol, "train-gpu")
    run = passed_run(claim)
    rejected = services.claim_request_submit(
        user=alice, namespace_request=ns, name="four-gpus", device_class="gpu.nvidia.com", count=4
    )
    services.claim_request_reject(
        user=carol, claim_request=rejected, reason="Two are enough for this model"
    )
    waiting_ns = services.namespace_request_submit(user=alice, cluster=e2e_cluster, name="nlp-ml")
    services.claim_request_submit(
        user=alice, namespace_request=ns, name="eval-gpu", device_class="gpu.nvidia.com", count=1
    )
    return {"ns": ns, "claim": claim, "run": run, "rejected": rejected, "waiting_ns": waiting_ns}


@pytest.fixture
def signed_in(live_server: Any, open_page: Callable[[], Page]) -> Iterator[Callable[[str], Page]]:
    def sign_in(username: str) -> Page:
        page = open_page()
        page.add_init_script(WATCH_ERRORS)
        log_in(page, live_server.url, username, PASSWORD)
        return page

    yield sign_in


def htmx_errors(page: Page) -> list[str]:
    return page.evaluate("window.__htmxErrors")


def test_it_has_no_serious_accessibility_violations_on_any_page(
    live_server: Any, open_page: Callable[[], Page], signed_in: Any, work: dict[str, Any]
) -> None:
    base = live_server.url
    anonymous = open_page()
    anonymous.goto(base + reverse("login"))
    assert_accessible(anonymous)
    page = signed_in("alice")
    pages = {
        "dashboard": reverse("dashboard"),
        "namespace": reverse("namespace", args=[work["ns"].pk]),
        "claim": reverse("claim", args=[work["claim"].pk]),
        "rejected-claim": reverse("claim", args=[work["rejected"].pk]),
        "run": reverse("run", args=[work["run"].pk]),
        "namespace-form": reverse("namespace-request"),
        "claim-form": reverse("claim-request"),
        "confirm-delete": reverse("namespace-delete", args=[work["ns"].pk]),
        "confirm-release": reverse("claim-release", args=[work["claim"].pk]),
        "tokens": reverse("api-tokens"),
        "clusters": reverse("clusters"),
    }
    for name, path in pages.items():
        page.goto(base + path)
        assert_accessible(page)
        if name == "dashboard":  # its actions column is a table cell, with its borders
            display = "getComputedStyle(document.querySelector('td.actions')).display"
            assert page.evaluate(display) == "table-cell"
        if name in ("namespace", "confirm-delete"):  # docs/ui.md shows these
            screenshot(page, {"namespace": "namespace-access"}.get(name, name))
    approver = signed_in("carol")
    approver.goto(base + reverse("approvals"))
    assert_accessible(approver)


def test_it_shows_a_new_request_in_the_open_approval_queue(
    signed_in: Any, live_server: Any, work: dict[str, Any], alice: User
) -> None:
    approver = signed_in("carol")
    approver.goto(live_server.url + reverse("approvals"))
    expect(approver.locator("#claim-queue")).to_contain_text("eval-gpu")
    mark_page(approver)
    services.claim_request_submit(
        user=alice, namespace_request=work["ns"], name="late-gpu", device_class="gpu.nvidia.com"
    )
    expect(approver.locator("#claim-queue")).to_contain_text("late-gpu", timeout=LIVE)
    expect(approver.locator("#pending-approvals")).to_have_text("3")
    screenshot(approver, "approval-queue")
    assert_not_reloaded(approver)
    assert htmx_errors(approver) == []


def test_it_approves_a_claim_whose_namespace_row_is_not_shown(
    signed_in: Any, live_server: Any, work: dict[str, Any], alice: User, carol: User
) -> None:
    claim = services.claim_request_submit(
        user=alice,
        namespace_request=work["waiting_ns"],
        name="nlp-gpu",
        device_class="gpu.nvidia.com",
    )
    approver = signed_in("carol")
    approver.goto(live_server.url + reverse("approvals") + "?kind=claim")
    row = approver.locator(f"#claim-request-{claim.pk}")
    mark_page(approver)
    row.get_by_role("button", name="Approve").click()
    expect(row).to_contain_text("approved")
    expect(row).to_contain_text("by carol")
    # The decided row stays on the live page after the queue redrew itself.
    services.namespace_request_submit(user=alice, cluster=work["ns"].cluster, name="later-ml")
    expect(approver.locator("#pending-approvals")).to_have_text("2", timeout=LIVE)
    expect(row).to_contain_text("by carol")
    assert htmx_errors(approver) == []
    assert_not_reloaded(approver)


def test_it_deletes_a_namespace_only_after_the_keyboard_confirms(
    signed_in: Any, live_server: Any, work: dict[str, Any]
) -> None:
    page = signed_in("alice")
    page.goto(live_server.url + reverse("namespace", args=[work["ns"].pk]))
    page.locator("#delete-namespace").focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("Delete namespace vision-ml?")
    expect(page.locator("#doomed-claims")).to_contain_text("train-gpu")
    assert NamespaceRequest.objects.get(pk=work["ns"].pk).state == "active"
    page.get_by_role("button", name="Delete vision-ml").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".messages")).to_contain_text("Deleting it, with the claims in it.")
    assert NamespaceRequest.objects.get(pk=work["ns"].pk).state == "deleting"


def test_it_copies_the_kubectl_lines(
    signed_in: Any, live_server: Any, work: dict[str, Any]
) -> None:
    page = signed_in("alice")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(live_server.url + reverse("namespace", args=[work["ns"].pk]))
    button = page.get_by_role("button", name="Copy the kubectl lines")
    button.focus()
    page.keyboard.press("Enter")
    status = page.locator("#access .copy-status")
    expect(status).not_to_be_empty()
    copied = status.inner_text()
    if copied == "Copied.":
        pasted = page.evaluate("navigator.clipboard.readText()")
        assert pasted.startswith("kubectl --kubeconfig") and "get resourceclaims" in pasted
    else:  # no clipboard (not a secure context): the text is selected for Ctrl+C
        assert "press Ctrl+C" in copied
        assert page.evaluate("getSelection().toString()").startswith("kubectl --kubeconfig")


def test_it_ticks_the_elapsed_time_of_a_running_run(
    signed_in: Any, live_server: Any, work: dict[str, Any], carol: User
) -> None:
    claim = ready_claim(work["ns"], carol, "tick-gpu")
    run = services.verification_run_start(user=claim.owner, claim_request=claim)
    VerificationRun.objects.filter(pk=run.pk).update(
        state="running", started_at=datetime.now(UTC) - timedelta(seconds=65)
    )
    page = signed_in("alice")
    page.goto(live_server.url + reverse("run", args=[run.pk]))
    clock = page.locator("#run-elapsed")
    expect(clock).to_contain_text("1 min")
    first = clock.inner_text()
    expect(clock).not_to_have_text(first, timeout=LIVE)  # it moves on by itself


def test_it_drops_the_requested_notice_once_an_approver_decided(
    signed_in: Any, live_server: Any, work: dict[str, Any], carol: User
) -> None:
    page = signed_in("alice")
    page.goto(live_server.url + reverse("claim-request"))
    page.fill("input[name=name]", "notice-gpu")
    page.get_by_role("button", name="Submit for approval").click()
    notice = page.locator(".messages li.success")
    expect(notice).to_contain_text("requested; an approver decides next")
    mark_page(page)
    claim = ClaimRequest.objects.get(name="notice-gpu")
    services.claim_request_approve(user=carol, claim_request=claim)
    expect(page.locator("#claim-status")).to_contain_text("approved", timeout=LIVE)
    expect(notice).to_have_count(0, timeout=LIVE)
    assert_not_reloaded(page)


def test_it_keeps_a_reason_being_typed_when_the_queue_redraws(
    signed_in: Any, live_server: Any, work: dict[str, Any], alice: User
) -> None:
    approver = signed_in("carol")
    approver.goto(live_server.url + reverse("approvals"))
    reason = approver.locator("tr", has_text="eval-gpu").get_by_label("Reason for rejecting")
    reason.fill("Use the A100 pool")
    services.claim_request_submit(
        user=alice, namespace_request=work["ns"], name="late-gpu", device_class="gpu.nvidia.com"
    )
    expect(approver.locator("#claim-queue")).to_contain_text("late-gpu", timeout=LIVE)
    expect(reason).to_have_value("Use the A100 pool")
    expect(reason).to_be_focused()


def test_it_keeps_a_rows_error_when_the_queue_redraws(
    signed_in: Any, live_server: Any, work: dict[str, Any], alice: User, carol: User
) -> None:
    approver = signed_in("carol")
    approver.goto(live_server.url + reverse("approvals"))
    row = approver.locator("tr", has_text="eval-gpu")
    row.get_by_role("button", name="Reject").click()
    error = row.locator(".errorlist")
    expect(error).to_contain_text("Say why, so the requester knows")
    mark_page(approver)
    # Another change redraws the queue around the row: the error it answered with stays.
    services.claim_request_submit(
        user=alice, namespace_request=work["ns"], name="late-gpu", device_class="gpu.nvidia.com"
    )
    expect(approver.locator("#claim-queue")).to_contain_text("late-gpu", timeout=LIVE)
    expect(error).to_contain_text("Say why, so the requester knows")
    # Once the row itself changes, the redrawn row is the one shown.
    claim = ClaimRequest.objects.get(name="eval-gpu")
    services.claim_request_approve(user=carol, claim_request=claim)
    expect(row).to_contain_text("approved", timeout=LIVE)
    expect(error).to_have_count(0)
    assert_not_reloaded(approver)
    assert htmx_errors(approver) == []


def test_it_drops_the_dashboards_requested_notice_once_decided(
    signed_in: Any, live_server: Any, work: dict[str, Any], carol: User
) -> None:
    page = signed_in("alice")
    page.goto(live_server.url + reverse("namespace-request"))
    page.fill("input[name=name]", "notice-ml")
    page.get_by_role("button", name="Request namespace").click()
    notice = page.locator(".messages li.success")
    expect(notice).to_contain_text("requested; an approver decides next")
    mark_page(page)
    ns = NamespaceRequest.objects.get(name="notice-ml")
    services.namespace_request_approve(user=carol, namespace_request=ns)
    expect(page.locator(f"#namespace-{ns.pk}")).to_contain_text("approved", timeout=LIVE)
    expect(notice).to_have_count(0, timeout=LIVE)
    assert_not_reloaded(page)
