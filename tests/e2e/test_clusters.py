"""A second cluster in a real browser: an admin registers a second kubesim by pasting its
kubeconfig (mistakes shown next to the field, the context offered from the kubeconfig), the
portal checks it, and a data scientist's namespace on it is created there by the worker. The
second cluster's own page shows its version, preflight and GPU map; when it goes away the
clusters list says so, and the first cluster's pages work on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.error import HTTPError

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

import kubesim
from claims.clusters import gateways
from claims.models import Cluster, NamespaceRequest
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import KUBELET_SPEED, log_in, screenshot
from tests.fixtures.kubesim import QUIET_TOPOLOGY
from tests.fixtures.portal import PASSWORD, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def second_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=KUBELET_SPEED, topology=QUIET_TOPOLOGY)
    yield handle
    handle.stop()
    gateways.forget_gateways()


def namespace_in(handle: kubesim.Handle, name: str) -> bool:
    try:
        handle.admin("GET", f"/api/v1/namespaces/{name}")
    except HTTPError as error:
        if error.code == 404:
            return False
        raise
    return True


def show_a_mistake_next_to_the_field(page: Page) -> None:
    page.fill("input[name=name]", "second")
    page.fill("textarea[name=kubeconfig_text]", "clusters: [oops")
    page.get_by_role("button", name="Register and check").click()
    field = page.locator("#field-kubeconfig_text")
    expect(field.locator(".errorlist")).to_contain_text("This is not valid YAML (line 1).")
    expect(page.locator("textarea[name=kubeconfig_text]")).to_have_value("")  # never echoed


def register_the_second_cluster(page: Page, base: str, handle: kubesim.Handle) -> None:
    page.goto(base + "/clusters/")
    page.get_by_role("link", name="Register a cluster").click()
    show_a_mistake_next_to_the_field(page)
    page.goto(base + "/clusters/new/")
    page.fill("input[name=name]", "second")
    page.fill("textarea[name=kubeconfig_text]", Path(handle.kubeconfig).read_text())
    # The context picker fills from the pasted kubeconfig (its current context chosen).
    expect(page.locator("#contexts-found")).to_contain_text("1 context in this kubeconfig.")
    expect(page.locator("select[name=context]")).to_have_value("kubesim")
    assert_accessible(page)
    screenshot(page, "cluster-register")
    page.get_by_role("button", name="Register and check").click()
    expect(page.locator(".messages")).to_contain_text("second answered; preflight: 6/6 ok.")
    row = page.locator("#clusters tr", has_text="second")
    expect(row).to_contain_text("reachable")
    expect(row).to_contain_text("uploaded kubeconfig (kubesim)")
    assert handle.token not in page.content()
    assert_accessible(page)


def request_a_namespace_on_it(page: Page, base: str) -> None:
    page.goto(base + "/namespaces/new/")
    page.select_option("select[name=cluster]", label="second")
    page.fill("input[name=name]", "on-second")
    page.get_by_role("button", name="Request namespace").click()
    expect(page.locator("#dashboard-live")).to_contain_text("on-second")


def its_own_page_shows_what_it_is(page: Page, base: str, cluster: Cluster) -> None:
    """Version, preflight and GPU map of one cluster, reached from the clusters list."""
    page.goto(base + "/clusters/")
    row = page.locator(f"#cluster-{cluster.pk}")
    row.get_by_role("link", name=cluster.name, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Cluster {cluster.name}")
    expect(page.locator("#server-version")).to_have_text("v1.34.1")
    expect(page.locator("#served-versions")).to_have_text("v1, v1beta2, v1beta1")
    preflight = page.locator("section", has=page.get_by_role("heading", name="Preflight checks"))
    expect(preflight).to_contain_text("devices published by gpu.nvidia.com")
    expect(preflight.locator(".badge.ok").first).to_be_visible()
    expect(preflight.locator(".badge.bad")).to_have_count(0)
    expect(page.locator("#gpu-map .gpu-card")).to_have_count(8)
    expect(page.locator("#gpu-totals")).to_contain_text("devices free")
    assert_accessible(page)


def it_goes_away_and_the_list_says_so(
    page: Page, base: str, handle: kubesim.Handle, second: Cluster
) -> None:
    handle.stop()
    page.goto(base + "/clusters/")
    row = page.locator(f"#cluster-{second.pk}")
    row.get_by_role("button", name="Check second again").click()
    row = page.locator(f"#cluster-{second.pk}")
    expect(row.locator(".badge.bad")).to_have_text("unreachable")
    expect(row).to_contain_text("connection refused")
    expect(row).to_contain_text(", just now")  # never "0 minutes ago"
    assert_accessible(page)


def test_an_admin_registers_a_second_cluster_and_a_namespace_lands_there(
    live_server: Any,
    open_page: Callable[[], Page],
    admin_user: User,
    alice: User,
    e2e_cluster: Cluster,
    e2e_kubesim: kubesim.Handle,
    second_kubesim: kubesim.Handle,
    celery_worker_process: Any,
) -> None:
    base = live_server.url
    admin, scientist = open_page(), open_page()
    log_in(admin, base, "admin", "password")
    register_the_second_cluster(admin, base, second_kubesim)
    log_in(scientist, base, "alice", PASSWORD)
    request_a_namespace_on_it(scientist, base)

    admin.goto(base + "/approvals/")
    admin.locator("tr", has_text="on-second").get_by_role("button", name="Approve").click()
    ns = NamespaceRequest.objects.get(name="on-second")
    wait_until(lambda: ns.refresh_from_db() or ns.state == "active", timeout=60)
    assert ns.cluster.name == "second"
    assert namespace_in(second_kubesim, "on-second")
    assert not namespace_in(e2e_kubesim, "on-second")  # not on the first cluster

    second = Cluster.objects.get(name="second")
    its_own_page_shows_what_it_is(admin, base, second)
    it_goes_away_and_the_list_says_so(admin, base, second_kubesim, second)
    # The first cluster is not held back by the second one's absence.
    its_own_page_shows_what_it_is(scientist, base, e2e_cluster)
    expect(scientist.locator("#cluster-unreachable")).to_have_count(0)
    scientist.goto(base + "/")
    expect(scientist.locator("#dashboard-live")).to_contain_text("on-second")
