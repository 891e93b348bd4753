"""The cluster pages: versions, served DRA APIs, device classes, inventory, preflight; and
admins registering, changing, checking and removing clusters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.http import HttpResponse
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import kubesim
from claims.clusters import gateways
from claims.clusters.registry import KUBECONFIG
from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from claims.web.views.clusters import map_version
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import GPU_CLASS, client_for


@pytest.fixture(autouse=True)
def forget_gateways() -> Any:
    yield
    gateways.forget_gateways()


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


def test_it_says_just_now_for_a_cluster_synced_or_lost_a_moment_ago(
    cluster: Cluster, bob: User
) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(last_synced_at=timezone.now())
    content = client_for(bob).get(reverse("clusters")).content.decode()
    assert '<td class="muted">just now</td>' in content
    assert "0\xa0minutes" not in content
    Cluster.objects.filter(pk=cluster.pk).update(unreachable_since=timezone.now())
    content = client_for(bob).get(reverse("clusters")).content.decode()
    assert " UTC, just now</span>" in content and "0\xa0minutes" not in content


def test_it_answers_404_for_an_unknown_cluster(bob: User) -> None:
    assert client_for(bob).get(reverse("cluster", args=[999])).status_code == 404


# --- registering, changing, checking and removing clusters (admins) ------------------


def kubeconfig_of(handle: kubesim.Handle) -> str:
    return Path(handle.kubeconfig).read_text()


def register(admin: User, **data: Any) -> HttpResponse:
    fields = {"name": "second", "source": KUBECONFIG, "kubeconfig_text": "", "context": ""}
    return client_for(admin).post(reverse("cluster-register"), fields | data, follow=True)


def field_html(response: HttpResponse, field: str) -> str:
    content = response.content.decode()
    start = content.index(f'id="field-{field}"')
    return content[start : content.index("</div>", content.index("errorlist", start))]


def test_it_lets_only_admins_manage_clusters(cluster: Cluster, bob: User, charlie: User) -> None:
    urls = [
        reverse("cluster-register"),
        reverse("cluster-edit", args=[cluster.pk]),
        reverse("cluster-remove", args=[cluster.pk]),
    ]
    for user in (bob, charlie):
        assert [client_for(user).get(url).status_code for url in urls] == [403, 403, 403]
        recheck = client_for(user).post(reverse("cluster-recheck", args=[cluster.pk]))
        assert recheck.status_code == 403
        assert (
            "Register a cluster" not in client_for(user).get(reverse("clusters")).content.decode()
        )
    assert client_for(None).get(urls[0]).status_code == 302


def test_an_admin_registers_a_cluster_by_pasting_a_kubeconfig(
    admin_user: User, kubesim_private: kubesim.Handle
) -> None:
    page = client_for(admin_user).get(reverse("clusters")).content.decode()
    assert 'id="register-cluster"' in page
    response = register(admin_user, kubeconfig_text=kubeconfig_of(kubesim_private))
    content = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("clusters")
    assert "Registered cluster second." in content
    assert "second answered; preflight: 6/6 ok." in content
    assert "uploaded kubeconfig (kubesim)" in content and 'badge ok">reachable' in content
    assert kubesim_private.token not in content
    cluster = Cluster.objects.get(name="second")
    assert cluster.inventory["devices"] and cluster.preferred_resource_version == "v1"
    edit = client_for(admin_user).get(reverse("cluster-edit", args=[cluster.pk])).content.decode()
    assert kubesim_private.token not in edit and 'id="kubeconfig-kept"' in edit


def test_an_admin_registers_a_cluster_by_uploading_a_file(
    admin_user: User, kubesim_private: kubesim.Handle
) -> None:
    upload = SimpleUploadedFile("config", kubeconfig_of(kubesim_private).encode())
    response = register(admin_user, name="uploaded", kubeconfig_file=upload)
    assert "uploaded answered" in response.content.decode()
    assert Cluster.objects.get(name="uploaded").context == "kubesim"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("clusters: [oops", "This is not valid YAML (line 1)."),
        ("apiVersion: v1\nkind: Config\ncontexts: []\n", "This kubeconfig has no contexts."),
        ("", "Upload or paste a kubeconfig."),
    ],
)
def test_it_shows_what_is_wrong_with_a_kubeconfig_next_to_it(
    admin_user: User, text: str, words: str
) -> None:
    response = register(admin_user, kubeconfig_text=text)
    assert response.status_code == 400
    assert words in field_html(response, "kubeconfig_text")
    assert 'class="field has-error" id="field-kubeconfig_text"' in response.content.decode()
    assert not Cluster.objects.exists()


def test_it_asks_for_a_context_the_kubeconfig_has(
    admin_user: User, kubesim_private: kubesim.Handle
) -> None:
    config = yaml.safe_load(kubeconfig_of(kubesim_private))
    config["contexts"].append({"name": "other", "context": config["contexts"][0]["context"]})
    text = yaml.safe_dump(config)
    response = register(admin_user, kubeconfig_text=text, context="prod")
    assert response.status_code == 400
    errors = field_html(response, "context")
    assert "Pick one of this kubeconfig&#x27;s contexts: kubesim, other." in errors
    assert '<option value="other">other</option>' in errors  # the picker offers them now
    assert kubesim_private.token not in response.content.decode()
    picker = client_for(admin_user).post(reverse("cluster-contexts"), {"kubeconfig_text": text})
    options = picker.content.decode()
    assert '<option value="kubesim" selected>kubesim</option>' in options  # current-context
    assert "2 contexts in this kubeconfig." in options


def test_it_registers_an_unreachable_cluster_and_says_so(
    admin_user: User, alice: User, kubesim_private: kubesim.Handle
) -> None:
    text = kubeconfig_of(kubesim_private)
    kubesim_private.stop()
    content = register(admin_user, name="gone", kubeconfig_text=text).content.decode()
    assert "gone is unreachable: connection refused" in content
    assert 'badge bad">unreachable</span>' in content
    form = client_for(alice).get(reverse("namespace-request")).content.decode()
    assert ">gone (unreachable since " in form


def test_an_admin_changes_a_cluster_keeping_its_kubeconfig(
    admin_user: User, kubesim_private: kubesim.Handle
) -> None:
    register(admin_user, kubeconfig_text=kubeconfig_of(kubesim_private))
    cluster = Cluster.objects.get(name="second")
    stored = cluster.kubeconfig_encrypted
    url = reverse("cluster-edit", args=[cluster.pk])
    data = {"name": "renamed", "source": KUBECONFIG, "context": "kubesim"}
    content = client_for(admin_user).post(url, data, follow=True).content.decode()
    assert "Saved cluster renamed." in content and "renamed answered" in content
    cluster.refresh_from_db()
    assert cluster.name == "renamed" and cluster.kubeconfig_encrypted != stored
    check = client_for(admin_user).post(reverse("cluster-recheck", args=[cluster.pk]), follow=True)
    assert "renamed answered; preflight: 6/6 ok." in check.content.decode()


def test_it_removes_a_cluster_only_without_live_requests(
    admin_user: User, alice: User, charlie: User, cluster: Cluster
) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="alice-ml")
    url = reverse("cluster-remove", args=[cluster.pk])
    confirm = client_for(admin_user).get(url).content.decode()
    assert 'id="remove-refused"' in confirm and "still has 1 live request" in confirm
    refused = client_for(admin_user).post(url, follow=True).content.decode()
    assert "kubesim still has 1 live request(s)" in refused
    assert Cluster.objects.filter(pk=cluster.pk).exists()
    services.namespace_request_reject(user=charlie, namespace_request=ns, reason="not now")
    confirm = client_for(admin_user).get(url).content.decode()
    assert "its 1 finished namespace request with their claims and runs" in confirm
    removed = client_for(admin_user).post(url, follow=True).content.decode()
    assert "Removed cluster kubesim." in removed
    assert not Cluster.objects.filter(pk=cluster.pk).exists()


def test_only_admins_see_where_the_portal_reads_a_clusters_credentials(
    cluster: Cluster, bob: User, charlie: User, admin_user: User
) -> None:
    """The kubeconfig's path is the server's, not a data scientist's business (issue 23.9)."""
    path = "/etc/gpu-portal/clusters/production.kubeconfig"
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig_path=path)
    url = reverse("cluster", args=[cluster.pk])
    for user in (bob, charlie):
        content = client_for(user).get(url).content.decode()
        assert path not in content and "Connection" not in content
    assert path in client_for(admin_user).get(url).content.decode()


@pytest.mark.django_db(transaction=True)
def test_it_follows_the_map_without_reading_every_claim(
    namespace: NamespaceRequest, bob: User
) -> None:
    """Outside a transaction (as served) the map's live version is Redis's count of changes:
    no aggregate over the cluster's claims, which grew with them; a change still moves it."""
    url = reverse("cluster", args=[namespace.cluster_id])
    client = client_for(bob)
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    assert not [q for q in queries.captured_queries if 'MAX("claims_claimrequest"' in q["sql"]]
    before = map_version(namespace.cluster_id)
    services.claim_request_submit(
        user=namespace.owner, namespace_request=namespace, name="new-gpu", device_class=GPU_CLASS
    )
    assert map_version(namespace.cluster_id) != before


def test_an_admin_gives_a_clusters_prometheus_with_field_errors(
    admin_user: User, kubesim_private: kubesim.Handle
) -> None:
    register(admin_user, kubeconfig_text=kubeconfig_of(kubesim_private))
    cluster = Cluster.objects.get(name="second")
    data = {"name": cluster.name, "source": KUBECONFIG, "context": "kubesim"}
    url = reverse("cluster-edit", args=[cluster.pk])
    bad = data | {"prometheus_url": "prometheus:9090", "prometheus_selector": "cluster=lab"}
    response = client_for(admin_user).post(url, bad)
    assert response.status_code == 400
    assert "Give an http:// or https:// URL" in field_html(response, "prometheus_url")
    assert "Give PromQL label matchers" in field_html(response, "prometheus_selector")
    cluster.refresh_from_db()
    assert cluster.prometheus_url == ""

    good = data | {
        "prometheus_url": "http://prometheus.monitoring:9090",
        "prometheus_selector": 'cluster="lab", region=~"eu-.*"',
    }
    response = client_for(admin_user).post(url, good, follow=True)
    assert response.redirect_chain[-1][0] == reverse("clusters")
    cluster.refresh_from_db()
    assert cluster.prometheus_url == "http://prometheus.monitoring:9090"
    assert cluster.prometheus_selector == 'cluster="lab", region=~"eu-.*"'
    page = client_for(admin_user).get(url).content.decode()
    assert 'value="http://prometheus.monitoring:9090"' in page


def test_the_django_admin_checks_a_clusters_prometheus_the_same_way(cluster: Cluster) -> None:
    from claims.admin import ClusterAdminForm

    fields = {f.name: getattr(cluster, f.name) for f in Cluster._meta.fields if f.name != "id"}
    form = ClusterAdminForm(
        fields | {"prometheus_url": "ftp://x", "prometheus_selector": 'job="dcgm"'},
        instance=cluster,
    )
    assert not form.is_valid()
    assert list(form.errors) == ["prometheus_url"]
