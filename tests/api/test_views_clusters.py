"""Clusters as the portal last saw them, their device classes and devices; who am I."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from claims.models import Cluster
from tests.api.conftest import GPU

Api = Callable[[str], APIClient]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/clusters/",
        "/api/v1/clusters/{id}/",
        "/api/v1/clusters/{id}/device-classes/",
        "/api/v1/clusters/{id}/devices/",
        "/api/v1/me/",
    ],
)
def test_it_shows_clusters_to_every_user_but_not_to_strangers(
    api: Api, cluster: Cluster, url: str
) -> None:
    url = url.format(id=cluster.pk)
    got = tuple(api(who).get(url).status_code for who in ("anonymous", "alice", "bob", "carol"))
    assert got == (401, 200, 200, 200)


def test_it_shows_the_discovered_versions(api: Api, cluster: Cluster) -> None:
    data = api("alice").get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert data["server_version"].startswith("v1.")
    assert data["resource_versions"] == ["v1", "v1beta2", "v1beta1"]
    assert data["preferred_resource_version"] == "v1"
    assert data["simulated"] is True


def test_it_lists_device_classes_with_counts(api: Api, cluster: Cluster) -> None:
    classes = api("alice").get(f"/api/v1/clusters/{cluster.pk}/device-classes/").json()
    gpu = next(dc for dc in classes if dc["name"] == GPU)
    assert gpu["device_count"] == cluster.device_count(GPU) > 0
    assert gpu["selectors"]


def test_it_lists_devices_and_filters_them(api: Api, cluster: Cluster) -> None:
    url = f"/api/v1/clusters/{cluster.pk}/devices/"
    devices = api("alice").get(url).json()
    assert devices and {"node", "driver", "pool", "name", "attributes"} <= set(devices[0])
    of_class = api("alice").get(f"{url}?device_class={GPU}").json()
    assert len(of_class) == cluster.device_count(GPU)
    node = devices[0]["node"]
    on_node = api("alice").get(f"{url}?node={node}").json()
    assert on_node and {d["node"] for d in on_node} == {node}
    assert api("alice").get(f"{url}?device_class=no.such.class").json() == []


def test_it_answers_404_for_an_unknown_cluster(api: Api, cluster: Cluster) -> None:
    assert api("alice").get(f"/api/v1/clusters/{cluster.pk + 1}/").status_code == 404


@pytest.mark.parametrize(("who", "approver"), [("alice", False), ("carol", True)])
def test_it_says_who_the_token_belongs_to(api: Api, who: str, approver: bool) -> None:
    assert api(who).get("/api/v1/me/").json() == {"username": who, "is_approver": approver}
