"""The cluster pages: versions, served DRA APIs, device classes, inventory, preflight."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.urls import reverse

from claims.models import Cluster
from tests.claims.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.test_views import client_for


def test_it_sends_anonymous_visitors_to_login(cluster: Cluster) -> None:
    for url in (reverse("clusters"), reverse("cluster", args=[cluster.pk])):
        response = client_for(None).get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_lists_clusters_with_their_versions(cluster: Cluster, bob: User) -> None:
    content = client_for(bob).get(reverse("clusters")).content.decode()
    assert "v1.34.1" in content
    assert "v1, v1beta2, v1beta1" in content
    assert 'class="badge sim"' in content


def test_it_shows_what_a_cluster_serves_and_holds(cluster: Cluster, bob: User) -> None:
    content = client_for(bob).get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert '<dd id="server-version">v1.34.1</dd>' in content
    assert '<dd id="served-versions">v1, v1beta2, v1beta1</dd>' in content
    assert "resource.k8s.io/v1</dd>" in content
    assert "device.driver == &#x27;gpu.nvidia.com&#x27;" in content
    assert content.count("<td>NVIDIA H100 80GB HBM3</td>") == 2
    assert "embedded Kubernetes API simulator" in content


def test_it_judges_the_seeds_prerequisites(cluster: Cluster, bob: User) -> None:
    content = client_for(bob).get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert content.count('<span class="badge ok">ok</span>') == 5
    assert "2 devices published by gpu.nvidia.com" in content
    assert "1: gpu-node-1" in content


def test_it_flags_a_cluster_too_old_for_dra(cluster: Cluster, bob: User) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(
        server_version="v1.31.4", resource_versions=[], preferred_resource_version=""
    )
    content = client_for(bob).get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert content.count('<span class="badge bad">fail</span>') == 5
    assert "v1.31.4 (needs 1.33 or newer)" in content
    assert "not served by the cluster" in content


def test_it_shows_the_last_contact_error(cluster: Cluster, bob: User) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(last_error="connection refused")
    content = client_for(bob).get(reverse("cluster", args=[cluster.pk])).content.decode()
    assert "Last contact failed: connection refused" in content


def test_it_answers_404_for_an_unknown_cluster(bob: User) -> None:
    assert client_for(bob).get(reverse("cluster", args=[999])).status_code == 404
