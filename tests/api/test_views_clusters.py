"""Clusters as the portal last saw them, their device classes and devices; who am I; admins
registering, checking and removing clusters; the cluster a namespace request goes to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

import kubesim
from claims.clusters import gateways
from claims.models import Cluster
from tests.api.conftest import GPU, token_client

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


# --- admins register, check and remove clusters ---------------------------------------


@pytest.fixture
def as_admin(admin_user: User) -> Iterator[APIClient]:
    yield token_client(admin_user)
    gateways.forget_gateways()


def kubeconfig_text(handle: kubesim.Handle) -> str:
    return Path(handle.kubeconfig).read_text()


def test_only_admins_register_check_and_remove_clusters(api: Api, cluster: Cluster) -> None:
    calls = [
        ("post", "/api/v1/clusters/", {"name": "x", "source": "in_cluster"}),
        ("post", f"/api/v1/clusters/{cluster.pk}/check/", {}),
        ("delete", f"/api/v1/clusters/{cluster.pk}/", None),
    ]
    for method, url, body in calls:
        got = [
            getattr(api(who), method)(url, body, format="json").status_code
            for who in ("anonymous", "alice", "carol")
        ]
        assert got == [401, 403, 403], (method, url)
    assert Cluster.objects.count() == 1


def test_an_admin_registers_a_cluster_from_a_kubeconfig(
    as_admin: APIClient, kubesim_private: kubesim.Handle
) -> None:
    body = {"name": "second", "kubeconfig": kubeconfig_text(kubesim_private)}
    response = as_admin.post("/api/v1/clusters/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["contact"]["reachable"] is True and data["contact"]["problem"] == ""
    assert [check["ok"] for check in data["contact"]["preflight"]] == [True] * 6
    assert data["cluster"]["preferred_resource_version"] == "v1"
    assert data["cluster"]["unreachable_since"] is None
    assert kubesim_private.token not in response.content.decode()
    cluster = Cluster.objects.get(name="second")
    assert (
        cluster.context == "kubesim" and kubesim_private.token not in cluster.kubeconfig_encrypted
    )
    again = as_admin.post(f"/api/v1/clusters/{cluster.pk}/check/", format="json")
    assert again.status_code == 200 and again.json()["contact"]["reachable"] is True


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"kubeconfig": "clusters: [oops"}, {"kubeconfig": ["This is not valid YAML (line 1)."]}),
        ({"kubeconfig": "contexts: []"}, {"kubeconfig": ["This kubeconfig has no contexts."]}),
        ({}, {"kubeconfig": ["Upload or paste a kubeconfig."]}),
        ({"source": "carrier-pigeon"}, {"source": ['"carrier-pigeon" is not a valid choice.']}),
        (
            {"kubeconfig": "x", "prometheus_url": "ftp://p", "prometheus_selector": "lab"},
            {
                "prometheus_url": [
                    "Give an http:// or https:// URL, e.g. http://prometheus.monitoring:9090."
                ],
                "prometheus_selector": [
                    'Give PromQL label matchers, e.g. cluster="lab" (name, =, !=, =~ or !~, '
                    '"value").'
                ],
            },
        ),
    ],
)
def test_it_answers_400_with_what_is_wrong(as_admin: APIClient, body: dict, errors: dict) -> None:
    response = as_admin.post("/api/v1/clusters/", {"name": "bad"} | body, format="json")
    assert response.status_code == 400
    assert response.json() == errors
    assert not Cluster.objects.exists()


def test_it_refuses_an_unknown_context_and_a_name_taken(
    as_admin: APIClient, cluster: Cluster, kubesim_private: kubesim.Handle
) -> None:
    text = kubeconfig_text(kubesim_private)
    body = {"name": "second", "kubeconfig": text, "context": "prod"}
    response = as_admin.post("/api/v1/clusters/", body, format="json")
    assert response.json() == {"context": ["Pick one of this kubeconfig's contexts: kubesim."]}
    body = {"name": "kubesim", "kubeconfig": text}
    response = as_admin.post("/api/v1/clusters/", body, format="json")
    assert response.json() == {"name": ["A cluster named 'kubesim' is already registered."]}


def test_an_unreachable_cluster_is_registered_and_says_why(
    as_admin: APIClient, kubesim_private: kubesim.Handle
) -> None:
    text = kubeconfig_text(kubesim_private)
    kubesim_private.stop()
    response = as_admin.post(
        "/api/v1/clusters/", {"name": "gone", "kubeconfig": text}, format="json"
    )
    assert response.status_code == 201
    contact, cluster = response.json()["contact"], response.json()["cluster"]
    assert contact["reachable"] is False and contact["problem"].startswith("connection refused")
    assert cluster["unreachable_since"] and cluster["last_error"] == contact["problem"]


def test_removing_a_cluster_is_refused_while_it_has_live_requests(
    as_admin: APIClient, api: Api, cluster: Cluster
) -> None:
    created = api("alice").post("/api/v1/namespace-requests/", {"name": "team-a"}, format="json")
    assert created.status_code == 201  # one cluster: no need to name it
    response = as_admin.delete(f"/api/v1/clusters/{cluster.pk}/")
    assert response.status_code == 409
    assert "still has 1 live request(s)" in response.json()["detail"]
    api("alice").delete(f"/api/v1/namespace-requests/{created.json()['id']}/")
    removed = as_admin.delete(f"/api/v1/clusters/{cluster.pk}/")
    assert removed.status_code == 200 and removed.json()["name"] == "kubesim"
    assert not Cluster.objects.exists()


def test_a_namespace_request_names_its_cluster_when_there_are_several(
    api: Api, cluster: Cluster
) -> None:
    Cluster.objects.create(name="other")
    response = api("alice").post("/api/v1/namespace-requests/", {"name": "team-a"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"cluster": ["Name a cluster: the portal has more than one cluster."]}
    body = {"name": "team-a", "cluster": cluster.pk}
    assert api("alice").post("/api/v1/namespace-requests/", body, format="json").status_code == 201
