"""The GPU map and "why pending" in a real browser: the map draws each node's cards (MIG
partitions included), a device that DRA allocates shows as held by its claim without a reload,
the claim page highlights its device on its node, and a claim asking for more devices than are
free says why it waits and links to the matching devices. The map is a picture: a box per
node, a tile per device in the state the viewer sees, MIG devices inside their GPU's tile.
axe-core finds no serious or critical violation on the map."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse
from playwright.sync_api import Page, expect

import kubesim
from claims.clusters import gateways
from claims.domain import services
from claims.domain.transitions import transition
from claims.models import (
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    VerificationRun,
)
from claims.worker import cluster_steps, sync
from tests.claims.read.test_gpu_map import H100_ONLY, NO_SUCH_IMAGE, TOPOLOGY, namespace_exists
from tests.e2e.a11y import assert_accessible
from tests.e2e.conftest import KUBELET_SPEED, SCREENSHOTS, log_in, screenshot
from tests.e2e.test_flow import assert_not_reloaded, mark_page
from tests.fixtures.portal import PASSWORD, make_user, register_cluster, wait_until

pytestmark = pytest.mark.e2e
NAMESPACE_PREFIX = "vision-"


@pytest.fixture(scope="module")
def map_kubesim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubesim.Handle]:
    path = Path(tmp_path_factory.mktemp("topology")) / "map.yaml"
    path.write_text(TOPOLOGY)
    handle = kubesim.start(topology=str(path), speed=KUBELET_SPEED)
    yield handle
    handle.stop()


@pytest.fixture
def map_cluster(transactional_db: None, map_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(map_kubesim, name="lab")
    gateways.forget_gateways()


@pytest.fixture
def map_cleared(map_kubesim: kubesim.Handle) -> Iterator[None]:
    """Deletes the test's namespaces (their Pods with them), so the next finds every device free."""
    yield
    listed = map_kubesim.admin("GET", "/api/v1/namespaces")["items"]
    made = [item["metadata"]["name"] for item in listed]
    made = [name for name in made if name.startswith(NAMESPACE_PREFIX)]
    for name in made:
        map_kubesim.admin("DELETE", f"/api/v1/namespaces/{name}")
    wait_until(lambda: not any(map(namespace_exists(map_kubesim), made)), timeout=30)


def active_namespace(owner: User, cluster: Cluster) -> NamespaceRequest:
    ns = services.namespace_request_submit(
        user=owner, cluster=cluster, name=f"{NAMESPACE_PREFIX}{uuid.uuid4().hex[:4]}"
    )
    transition(ns, to="approved", allowed=("pending",))
    assert cluster_steps.apply_namespace(ns)
    ns.refresh_from_db()
    return ns


def applied_claim(
    owner: User, ns: NamespaceRequest, name: str, count: int, **fields: Any
) -> ClaimRequest:
    asked = {"device_class": "gpu.nvidia.com", "selector": H100_ONLY} | fields
    claim = services.claim_request_submit(
        user=owner, namespace_request=ns, name=name, count=count, **asked
    )
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    return claim


def started_run(owner: User, claim: ClaimRequest) -> VerificationRun:
    run = services.verification_run_start(user=owner, claim_request=claim)
    cluster_steps.start_run(run)
    run.refresh_from_db()
    return run


def synced_until(cluster: Cluster, condition: Callable[[], bool]) -> None:
    def synced() -> bool:
        sync.sync_cluster(cluster)
        return condition()

    wait_until(synced, timeout=30)


def hold_one_h100(
    alice: User, ns: NamespaceRequest, name: str = "train", **fields: Any
) -> ClaimRequest:
    """A claim whose run's Pod got its GPU but never starts (its images do not pull)."""
    claim = applied_claim(alice, ns, name, 1, **fields)
    with override_settings(VECTOR_ADD_IMAGE=NO_SUCH_IMAGE, DEVICE_QUERY_IMAGE=NO_SUCH_IMAGE):
        started_run(alice, claim)
    synced_until(claim.cluster, lambda: bool(ClaimRequest.objects.get(pk=claim.pk).allocation))
    claim.refresh_from_db()
    return claim


def see_the_map(page: Page) -> None:
    expect(page.locator("#gpu-totals")).to_contain_text("6/6 devices free")
    expect(page.locator("#gpu-node-gpu-node-1 .gpu-card")).to_have_count(2)
    mig_card = page.locator("#gpu-node-mig-node-1 .gpu-card.mig")
    expect(mig_card).to_contain_text("MIG, 3 partitions")
    expect(mig_card.locator(".gpu-device")).to_have_count(3)
    expect(mig_card).to_contain_text("2g.10gb")
    assert_accessible(page, within="#gpu-map")


def see_it_held_live(page: Page, claim: ClaimRequest) -> None:
    [device] = claim.allocation["devices"]
    cell = page.locator(f"#device-gpu-node-1-{device['device']}")
    expect(cell).to_contain_text(f"held by alice/{claim.name}")
    expect(page.locator("#gpu-totals")).to_contain_text("5/6 devices free")
    page.locator("#gpu-map details > summary").click()  # the map as text
    expect(cell.get_by_role("link", name=f"alice/{claim.name}")).to_have_attribute(
        "href", reverse("claim", args=[claim.pk])
    )


def test_it_maps_the_gpus_and_explains_a_claim_that_waits(
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    map_cluster: Cluster,
    map_cleared: None,
) -> None:
    ns = active_namespace(alice, map_cluster)
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(live_server.url + reverse("cluster", args=[map_cluster.pk]))
    see_the_map(page)
    mark_page(page)

    claim = hold_one_h100(alice, ns)
    see_it_held_live(page, claim)
    assert_not_reloaded(page)
    assert_accessible(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(live_server.url + reverse("claim", args=[claim.pk]))
    mine = page.locator("#claim-gpu-map .gpu-device.highlighted")
    expect(mine).to_have_count(1)
    expect(mine).to_contain_text("★ this claim's device")
    expect(page.locator("#claim-gpu-map .gpu-node")).to_have_count(1)

    waiting = applied_claim(alice, ns, "finetune", 2)
    run = started_run(alice, waiting)
    # It does not fit now: its run's Pod waits in the queue (claims/worker/queue_turn.py).
    assert VerificationRun.objects.get(pk=run.pk).state == "queued"
    page.goto(live_server.url + reverse("claim", args=[waiting.pk]))
    expect(page.locator("#queue-position")).to_contain_text("position 1 of 1")
    why = page.locator("#why-pending")
    expect(why).to_contain_text(
        "1 of the 2 devices of class gpu.nvidia.com and matching your selector is held by 1 "
        "other claim. At most 1 is free on one node; you need 2."
    )
    why.screenshot(path=str(SCREENSHOTS / "why-pending.png"))
    assert_accessible(page)

    why.get_by_role("link", name="See the matching devices on the GPU map").click()
    expect(page.locator("#gpu-map-filter")).to_contain_text("finetune")
    expect(page.locator("#gpu-map .gpu-mark", has_text="✓ matches")).to_have_count(2)
    screenshot(page, "gpu-map-filtered")


def test_the_map_is_a_picture_of_tiles_that_follows_allocations_live(
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    bob: User,
    map_cluster: Cluster,
    map_cleared: None,
) -> None:
    team = Team.objects.create(name="vision")
    for member in (alice, bob):
        TeamMembership.objects.create(team=team, user=member)
    dave = make_user("dave")
    hold_one_h100(
        bob, active_namespace(bob, map_cluster), "sweep", device_class="mig.nvidia.com", selector=""
    )
    hold_one_h100(dave, active_namespace(dave, map_cluster), "speech")
    ns = active_namespace(alice, map_cluster)
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.goto(live_server.url + reverse("cluster", args=[map_cluster.pk]))

    picture = page.locator("#gpu-picture")
    expect(picture).to_be_visible()
    expect(page.locator("#gpu-legend")).to_be_visible()
    expect(page.locator("#gpu-map-text")).to_be_hidden()  # the text, behind its summary
    expect(picture.locator(".gpu-box")).to_have_count(2)
    expect(picture.locator(".gpu-tile")).to_have_count(6)
    mig = page.locator("#gpu-parent-mig-node-1-gpu-0")
    expect(mig).to_be_visible()
    expect(mig.locator(".gpu-tile.gpu-slice")).to_have_count(3)
    expect(mig.locator(".gpu-tile.team")).to_have_count(1)
    expect(picture.locator(".gpu-tile.other")).to_have_count(1)
    expect(picture.get_by_role("img", name=re.compile("held by your team"))).to_have_count(1)
    expect(picture.locator(".gpu-tile.free")).to_have_count(4)
    mark_page(page)

    claim = hold_one_h100(alice, ns)

    [device] = claim.allocation["devices"]
    tile = page.locator(f"#tile-gpu-node-1-{device['device']}")
    expect(tile).to_have_attribute("data-state", "mine")
    expect(tile).to_be_visible()
    mine = picture.get_by_role("link", name=f"held by you, claim alice/{claim.name}")
    expect(mine).to_have_attribute("href", reverse("claim", args=[claim.pk]))
    expect(picture.locator(".gpu-tile.free")).to_have_count(3)
    expect(page.locator("#gpu-totals")).to_contain_text("3/6 devices free")
    assert_not_reloaded(page)
    assert_accessible(page, within="#gpu-map")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#gpu-map").screenshot(path=str(SCREENSHOTS / "gpu-map.png"))
