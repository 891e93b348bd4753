"""The GPU map, drawn from what kubesim publishes and allocates: a node of two H100s, and a
node with an A100 cut into MIG devices next to a whole A100."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

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
from claims.read import device_matching, gpu_map, utilisation
from claims.web.views.clusters import holds
from claims.worker import cluster_steps, sync
from tests.fixtures.portal import make_user, register_cluster, wait_until

# test_why_pending takes these fixtures with `import *`.
__all__ = ["map_cluster", "map_kubesim", "namespace_of"]

TOPOLOGY = """
nodes:
  - name: gpu-node-1
    gpus:
      - model: H100-80GB-HBM3
        count: 2
  - name: mig-node-1
    gpus:
      - model: A100-SXM4-40GB
        mig: [1g.5gb, 1g.5gb, 2g.10gb]
      - model: A100-SXM4-40GB
"""
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"
H100_ONLY = f"device.attributes['gpu.nvidia.com'].productName == '{H100}'"
NO_SUCH_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:no-such-tag"


@pytest.fixture(scope="module")
def map_kubesim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubesim.Handle]:
    path = Path(tmp_path_factory.mktemp("topology")) / "map.yaml"
    path.write_text(TOPOLOGY)
    handle = kubesim.start(topology=str(path), speed=20)
    yield handle
    handle.stop()


@pytest.fixture
def map_cluster(db: None, map_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(map_kubesim, name="map")
    gateways.forget_gateways()


@pytest.fixture
def namespace_of(
    map_cluster: Cluster, map_kubesim: kubesim.Handle
) -> Iterator[Callable[[User], NamespaceRequest]]:
    """Active namespaces, deleted from kubesim afterwards (with their Pods, so the devices
    are free for the next test)."""
    made: list[str] = []

    def make(user: User) -> NamespaceRequest:
        ns = services.namespace_request_submit(
            user=user, cluster=map_cluster, name=f"map-{uuid.uuid4().hex[:6]}"
        )
        transition(ns, to="approved", allowed=("pending",))
        assert cluster_steps.apply_namespace(ns)
        ns.refresh_from_db()
        made.append(ns.name)
        return ns

    yield make
    for name in made:
        map_kubesim.admin("DELETE", f"/api/v1/namespaces/{name}")
    wait_until(lambda: not any(map(namespace_exists(map_kubesim), made)), timeout=30)


def namespace_exists(handle: kubesim.Handle) -> Callable[[str], bool]:
    def exists(name: str) -> bool:
        found = handle.admin("GET", "/api/v1/namespaces")["items"]
        return any(item["metadata"]["name"] == name for item in found)

    return exists


def applied_claim(user: User, ns: NamespaceRequest, **fields: Any) -> ClaimRequest:
    values = {"name": f"c-{uuid.uuid4().hex[:6]}", "device_class": "gpu.nvidia.com"} | fields
    claim = services.claim_request_submit(user=user, namespace_request=ns, **values)
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "waiting", claim.state_message
    return claim


def started_run(user: User, claim: ClaimRequest) -> VerificationRun:
    run = services.verification_run_start(user=user, claim_request=claim)
    cluster_steps.start_run(run)
    run.refresh_from_db()
    return run


def held_by_a_stuck_pod(user: User, ns: NamespaceRequest, **fields: Any) -> ClaimRequest:
    """A claim whose run's Pod is scheduled (so DRA allocated the devices) but never starts:
    its image does not pull, so the devices stay held while the test looks."""
    claim = applied_claim(user, ns, **fields)
    with override_settings(VECTOR_ADD_IMAGE=NO_SUCH_IMAGE, DEVICE_QUERY_IMAGE=NO_SUCH_IMAGE):
        started_run(user, claim)

    def allocated() -> bool:
        sync.sync_cluster(claim.cluster)
        claim.refresh_from_db()
        return claim.allocation is not None

    wait_until(allocated, timeout=15)
    return claim


def test_it_draws_each_node_its_cards_and_their_mig_partitions(map_cluster: Cluster) -> None:
    drawn = gpu_map.build(map_cluster.inventory, [])

    assert [node.name for node in drawn.nodes] == ["gpu-node-1", "mig-node-1"]
    h100s = drawn.nodes[0].cards
    assert [(c.label, c.model, c.memory, c.is_mig) for c in h100s] == [
        ("gpu-0", H100, "81559Mi", False),
        ("gpu-1", H100, "81559Mi", False),
    ]
    cut, whole = drawn.nodes[1].cards
    assert (cut.label, cut.model, cut.is_mig, whole.label, whole.is_mig) == (
        "gpu-0",
        A100,
        True,
        "gpu-1",
        False,
    )
    assert [(cell.profile, cell.memory) for cell in cut.devices] == [
        ("1g.5gb", "4864Mi"),
        ("1g.5gb", "4864Mi"),
        ("2g.10gb", "9984Mi"),
    ]
    assert all(cell.name.startswith("gpu-0-mig-") for cell in cut.devices)
    assert (drawn.free, drawn.total) == (6, 6)


def test_it_counts_free_and_total_per_model(map_cluster: Cluster) -> None:
    counts = gpu_map.build(map_cluster.inventory, []).models

    assert [(c.model, c.kind, c.free, c.total) for c in counts] == [
        (A100, "1g.5gb", 2, 2),
        (A100, "2g.10gb", 1, 1),
        (A100, "whole GPU", 1, 1),
        (H100, "whole GPU", 2, 2),
    ]


def test_it_marks_the_devices_dra_allocated_to_a_claim(
    alice: User, bob: User, carol: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    ns = namespace_of(alice)
    claim = held_by_a_stuck_pod(alice, ns, count=1, selector=H100_ONLY)
    [device] = claim.allocation["devices"]

    for viewer, shown in ((alice, True), (carol, True), (bob, False)):
        drawn = gpu_map.build(map_cluster.inventory, holds(map_cluster, viewer))
        held = [cell for node in drawn.nodes for cell in node.devices if cell.holder]
        assert [(cell.pool, cell.name) for cell in held] == [(device["pool"], device["device"])]
        holder = held[0].holder
        assert holder is not None and holder.shown is shown
        assert holder.owner == ("alice" if shown else "")
        assert holder.claim_name == (claim.name if shown else "")
        assert (drawn.free, drawn.total) == (5, 6)
        assert [(c.model, c.free) for c in drawn.models if c.model == H100] == [(H100, 1)]


def test_it_marks_the_devices_a_claims_class_and_selector_match(map_cluster: Cluster) -> None:
    inv = map_cluster.inventory
    h100s = device_matching.matching_ids(inv, "gpu.nvidia.com", H100_ONLY)
    migs = device_matching.matching_ids(inv, "mig.nvidia.com", "")
    whole = device_matching.matching_ids(inv, "gpu.nvidia.com", "")

    assert sorted(name for _, _, name in h100s) == ["gpu-0", "gpu-1"]
    assert {pool for _, pool, _ in h100s} == {"gpu-node-1"}
    assert len(migs) == 3 and {pool for _, pool, _ in migs} == {"mig-node-1"}
    assert len(whole) == 3
    assert device_matching.matching_ids(inv, "no.such.class", "") == set()
    drawn = gpu_map.build(inv, [], matching=migs)
    assert drawn.filtered
    assert [cell.matching for cell in drawn.nodes[1].devices] == [True, True, True, False]


def test_it_limits_a_compact_map_to_the_claims_node_and_highlights_its_devices(
    alice: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    ns = namespace_of(alice)
    claim = held_by_a_stuck_pod(alice, ns, device_class="mig.nvidia.com", count=2)
    mine = gpu_map.allocated_ids(claim.allocation)

    drawn = gpu_map.build(
        map_cluster.inventory, holds(map_cluster, alice), highlight=mine, nodes=[claim.node]
    )

    assert [node.name for node in drawn.nodes] == ["mig-node-1"] == [claim.node]
    marked = [cell for cell in drawn.nodes[0].devices if cell.highlighted]
    assert {cell.id for cell in marked} == mine and len(marked) == 2
    assert all(cell.kind == "mig" and cell.holder for cell in marked)


def page(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_cluster_page_names_the_holder_only_to_approvers_and_the_owner(
    alice: User, bob: User, carol: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    ns = namespace_of(alice)
    claim = held_by_a_stuck_pod(alice, ns, count=2, selector=H100_ONLY)
    url = reverse("cluster", args=[map_cluster.pk])
    link = f'held by <a href="{reverse("claim", args=[claim.pk])}">alice/{claim.name}</a>'

    assert page(alice, url).count(link) == 2
    assert page(carol, url).count(link) == 2
    seen_by_bob = page(bob, url)
    assert claim.name not in seen_by_bob and "alice" not in seen_by_bob
    assert seen_by_bob.count('data-state="held"') == 2  # the map as text
    assert seen_by_bob.count('data-state="free"') == 4 + 4  # as text, and its tiles
    assert seen_by_bob.count('data-state="other"') == 2
    assert "<li><strong>4/6</strong> devices free</li>" in seen_by_bob


def test_the_claim_page_shows_its_devices_on_its_node(
    alice: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    ns = namespace_of(alice)
    claim = held_by_a_stuck_pod(alice, ns, count=1, selector=H100_ONLY)
    [device] = claim.allocation["devices"]

    content = page(alice, reverse("claim", args=[claim.pk]))

    assert 'id="claim-gpu-map"' in content
    assert 'id="gpu-node-gpu-node-1"' in content and "mig-node-1" not in content
    cell = f'id="device-gpu-node-1-{device["device"]}"'
    assert cell in content
    assert "★ this claim's device" in content


def test_the_map_for_a_claim_is_only_for_those_who_may_see_the_claim(
    alice: User, bob: User, carol: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    ns = namespace_of(alice)
    claim = applied_claim(alice, ns, device_class="mig.nvidia.com", count=1)
    url = reverse("cluster-claim-map", args=[map_cluster.pk, claim.pk])

    for viewer in (alice, carol):
        content = page(viewer, url)
        assert 'id="gpu-map-filter"' in content
        assert content.count('<span class="gpu-mark">✓ matches</span>') == 3
    client = Client()
    client.force_login(bob)
    assert client.get(url).status_code == 404
    other = Cluster.objects.create(name="elsewhere")
    client.force_login(alice)
    assert client.get(reverse("cluster-claim-map", args=[other.pk, claim.pk])).status_code == 404


def test_the_map_follows_allocations_without_a_reload(
    alice: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    client = Client()
    client.force_login(alice)
    content = client.get(reverse("cluster", args=[map_cluster.pk])).content.decode()
    [watch] = re.findall(r'id="cluster-watch" hx-get="([^"]+)"', content)
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)

    changed = client.get(html.unescape(watch)).content.decode()

    assert changed.count('id="gpu-map-picture" hx-swap-oob="true"') == 1
    assert changed.count('id="gpu-map-text" hx-swap-oob="true"') == 1
    assert f"alice/{claim.name}" in changed
    [device] = claim.allocation["devices"]
    assert tiles(changed)[f"tile-gpu-node-1-{device['device']}"].attrs["data-state"] == "mine"
    assert "Device classes" not in changed  # only the part that changed
    [again] = re.findall(r'id="cluster-watch" hx-get="([^"]+)"', changed)
    assert "since=" in again and again != watch


def test_an_unreachable_cluster_says_so_above_its_last_map(
    alice: User, map_cluster: Cluster
) -> None:
    since = timezone.now() - timedelta(minutes=5)
    Cluster.objects.filter(pk=map_cluster.pk).update(
        unreachable_since=since, last_error="connection refused"
    )

    content = page(alice, reverse("cluster", args=[map_cluster.pk]))

    assert "Unreachable since" in content
    assert "(5\xa0minutes ago): <bdi>connection refused</bdi>." in content
    assert "<li><strong>6/6</strong> devices free</li>" in content


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    ancestors: list[str]  # the ids of the elements around it, innermost last

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()


class Elements(HTMLParser):
    """Every element with an id, with the ids of those it sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, str]] = []
        self.found: dict[str, Element] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            around = [element_id for _, element_id in self.open if element_id]
            self.found[values["id"]] = Element(tag, values, around)
        if tag not in VOID:
            self.open.append((tag, values.get("id", "")))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass


def tiles(content: str) -> dict[str, Element]:
    parser = Elements()
    parser.feed(content)
    return {key: el for key, el in parser.found.items() if "gpu-tile" in el.classes}


def elements(content: str) -> dict[str, Element]:
    parser = Elements()
    parser.feed(content)
    return parser.found


def test_the_cluster_page_draws_a_tile_per_device_in_the_state_the_viewer_sees(
    alice: User, bob: User, carol: User, map_cluster: Cluster, namespace_of: Any
) -> None:
    team = Team.objects.create(name="vision")
    for member in (alice, bob):
        TeamMembership.objects.create(team=team, user=member)
    dave = make_user("dave")
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    [device] = claim.allocation["devices"]
    held = f"tile-gpu-node-1-{device['device']}"
    url = reverse("cluster", args=[map_cluster.pk])
    seen = (
        (alice, "mine", "held by you", True),
        (bob, "team", "held by your team", False),
        (dave, "other", "held by others", False),
        (carol, "other", "held by others", True),
    )

    for viewer, state, words, named in seen:
        content = page(viewer, url)
        drawn = tiles(content)
        assert len(drawn) == 6
        assert (drawn[held].attrs["data-state"], state in drawn[held].classes) == (state, True)
        assert words in drawn[held].attrs["aria-label"]
        assert drawn[held].attrs["aria-label"].startswith(f"{device['device']}: {H100}, 81559Mi")
        assert (f"claim alice/{claim.name}" in drawn[held].attrs["aria-label"]) is named
        assert (drawn[held].tag, drawn[held].attrs.get("href")) == (
            ("a", reverse("claim", args=[claim.pk])) if named else ("div", None)
        )
        others = [tile for key, tile in drawn.items() if key != held]
        assert {tile.attrs["data-state"] for tile in others} == {"free"}
        assert all(tile.attrs["aria-label"].endswith(", free") for tile in others)
        assert named or not re.search(rf"\b(alice|{re.escape(claim.name)})\b", content)


def test_the_map_has_a_legend_and_draws_mig_devices_inside_their_gpu(
    alice: User, map_cluster: Cluster
) -> None:
    content = page(alice, reverse("cluster", args=[map_cluster.pk]))
    found = elements(content)
    drawn = tiles(content)

    legend = content[
        content.index('id="gpu-legend"') : content.index("</ul>", content.index('id="gpu-legend"'))
    ]
    for words in ("free", "held by you", "held by your team", "held by others"):
        assert f"</span> {words}</li>" in legend
    parent = found["gpu-parent-mig-node-1-gpu-0"]
    assert parent.attrs["aria-label"] == f"gpu-0: {A100}, MIG, 3 devices"
    assert "gpu-box-mig-node-1" in parent.ancestors
    inside = [key for key, tile in drawn.items() if parent.attrs["id"] in tile.ancestors]
    assert len(inside) == 3 and all(key.startswith("tile-mig-node-1-gpu-0-mig-") for key in inside)
    assert all("gpu-slice" in drawn[key].classes for key in inside)
    assert [drawn[key].attrs["aria-label"].split(", ")[0].split(" ")[-1] for key in inside] == [
        "1g.5gb",
        "1g.5gb",
        "2g.10gb",
    ]
    whole = drawn["tile-mig-node-1-gpu-1"]
    assert "gpu-box-mig-node-1" in whole.ancestors and parent.attrs["id"] not in whole.ancestors
    assert whole.attrs["aria-label"] == f"gpu-1: {A100}, 40Gi, free"
    assert all("gpu-box-gpu-node-1" in drawn[f"tile-gpu-node-1-gpu-{n}"].ancestors for n in (0, 1))


def test_it_colours_held_devices_by_their_use_now(
    alice: User, map_cluster: Cluster, map_kubesim: kubesim.Handle, namespace_of: Any, settings
) -> None:
    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URLS = list(map_kubesim.dcgm_exporter_urls.values())
    claim = held_by_a_stuck_pod(alice, namespace_of(alice), count=1, selector=H100_ONLY)
    usage = utilisation.devices_usage()
    assert not isinstance(usage, str)
    drawn = gpu_map.build(map_cluster.inventory, holds(map_cluster, alice), usage=usage)
    cells = [cell for node in drawn.nodes for cell in node.devices]
    [held] = [cell for cell in cells if cell.holder]
    assert held.holder and held.holder.claim_id == claim.pk
    assert (held.activity, held.use) == (0.0, "idle")  # its Pod never started
    assert "activity 0.00 (idle)" in held.description
    assert all(cell.use == "" for cell in cells if not cell.holder)  # free: no colour
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("cluster", args=[map_cluster.pk])).content.decode()
    assert 'data-use="idle"' in page
