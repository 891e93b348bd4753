"""A namespace's page (state, claims, timeline, access) and its kubeconfig download."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.urls import reverse

import kubesim
from claims.clusters import gateways
from claims.domain import observations, services
from claims.models import ClaimRequest, NamespaceRequest
from claims.web.views.namespaces import CLAIMS_SHOWN
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for, htmx_client_for, poll_url
from tests.fixtures.portal import granted_namespace, register_cluster


def page(user: User, ns: NamespaceRequest) -> str:
    response = client_for(user).get(reverse("namespace", args=[ns.pk]))
    assert response.status_code == 200
    return response.content.decode()


def download(user: User | None, ns: NamespaceRequest) -> Any:
    return client_for(user).post(reverse("namespace-kubeconfig", args=[ns.pk]), follow=True)


def make_active(ns: NamespaceRequest, approver: User, *, granted: bool) -> NamespaceRequest:
    """Approved and created, as the worker leaves it (without a cluster behind it)."""
    services.namespace_request_approve(user=approver, namespace_request=ns)
    observations.namespace_applied(namespace_request=ns, uid="uid-1")
    if granted:
        observations.namespace_access_granted(namespace_request=ns)
    ns.refresh_from_db()
    return ns


@pytest.fixture
def active(namespace: NamespaceRequest, charlie: User) -> NamespaceRequest:
    return make_active(namespace, charlie, granted=True)


@pytest.fixture
def live_cluster(db: None, kubesim_cluster: kubesim.Handle) -> Iterator[Any]:
    yield register_cluster(kubesim_cluster, name="live")
    gateways.forget_gateways()


@pytest.fixture
def in_kubesim(live_cluster: Any, alice: User, charlie: User, namespace_name: str) -> Any:
    return granted_namespace(live_cluster, alice, charlie, namespace_name)


def test_it_sends_anonymous_visitors_to_login(namespace: NamespaceRequest) -> None:
    client = client_for(None)
    for response in (
        client.get(reverse("namespace", args=[namespace.pk])),
        client.post(reverse("namespace-kubeconfig", args=[namespace.pk])),
    ):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_hides_a_namespace_from_other_users(active: NamespaceRequest, bob: User) -> None:
    client = client_for(bob)
    assert client.get(reverse("namespace", args=[active.pk])).status_code == 404
    assert client.post(reverse("namespace-kubeconfig", args=[active.pk])).status_code == 404


def test_it_shows_a_pending_namespace_with_its_claims_and_timeline(
    claim: ClaimRequest,
) -> None:
    content = page(claim.owner, claim.namespace_request)
    assert "state-pending" in content
    assert "Training" in content  # the purpose
    assert f'href="{reverse("claim", args=[claim.pk])}"' in content
    assert "Requested." in content
    assert "Access comes once the namespace is active" in content
    assert "Download kubeconfig" not in content


def test_it_says_access_is_being_set_up_and_keeps_polling(
    namespace: NamespaceRequest, charlie: User
) -> None:
    ns = make_active(namespace, charlie, granted=False)
    content = page(ns.owner, ns)
    assert "Setting up access…" in content
    assert "Download kubeconfig" not in content
    assert '<div id="namespace-watch" hx-get=' in content


def test_it_stops_watching_once_access_is_granted(
    namespace: NamespaceRequest, charlie: User
) -> None:
    ns = make_active(namespace, charlie, granted=False)
    content = page(ns.owner, ns)
    observations.namespace_access_granted(namespace_request=ns)
    poll = htmx_client_for(ns.owner).get(poll_url(content))
    assert poll.status_code == 200
    assert poll.content.decode().lstrip().startswith('<div id="namespace-watch"></div>')
    assert "Download kubeconfig" in poll.content.decode()


def test_it_shows_the_owner_her_access_and_the_kubectl_lines(active: NamespaceRequest) -> None:
    content = page(active.owner, active)
    assert '<code id="access-role">edit</code>' in content
    assert '<code id="access-user">alice</code>' in content
    assert '<code id="access-service-account">gpu-portal-alice</code>' in content
    assert "valid for 8 hours" in content
    assert f'action="{reverse("namespace-kubeconfig", args=[active.pk])}"' in content
    assert "kubectl --kubeconfig kubesim-alice-ml.kubeconfig get resourceclaims" in content
    assert "kubectl --kubeconfig kubesim-alice-ml.kubeconfig apply -f pod.yaml" in content


def test_it_names_only_the_service_account_when_no_user_is_granted(
    active: NamespaceRequest, settings: Any
) -> None:
    settings.ACCESS_GRANT_USER = False
    settings.ACCESS_CLUSTER_ROLE = "gpu-user"
    settings.ACCESS_TOKEN_SECONDS = 5400
    content = page(active.owner, active)
    assert 'id="access-user"' not in content
    assert '<code id="access-role">gpu-user</code>' in content
    assert "valid for 1.5 hours" in content


def test_it_shows_an_approver_the_page_but_no_download(
    active: NamespaceRequest, charlie: User
) -> None:
    content = page(charlie, active)
    assert "gpu-portal-alice" in content
    assert "Download kubeconfig" not in content
    assert "Only alice can download" in content
    response = client_for(charlie).post(reverse("namespace-kubeconfig", args=[active.pk]))
    assert response.status_code == 403


def test_it_refuses_the_download_until_access_is_set_up(
    namespace: NamespaceRequest, charlie: User
) -> None:
    ns = make_active(namespace, charlie, granted=False)
    response = download(ns.owner, ns)
    assert response.redirect_chain[-1][0] == reverse("namespace", args=[ns.pk])
    assert "Namespace alice-ml is not ready for kubectl yet." in response.content.decode()


def test_it_shows_no_access_for_a_deleted_namespace(active: NamespaceRequest) -> None:
    services.namespace_request_delete(user=active.owner, namespace_request=active)
    observations.namespace_deleted(namespace_request=active)
    content = page(active.owner, active)
    assert "No access: the namespace is deleted." in content
    assert '<div id="namespace-watch"></div>' in content  # nothing changes any more


def test_it_links_the_namespace_from_the_dashboard_and_the_claim(claim: ClaimRequest) -> None:
    link = f'href="{reverse("namespace", args=[claim.namespace_request_id])}"'
    dashboard = client_for(claim.owner).get(reverse("dashboard")).content.decode()
    assert dashboard.count(link) == 2  # the namespace's row and the claim's
    claim_page = client_for(claim.owner).get(reverse("claim", args=[claim.pk])).content.decode()
    assert 'id="namespace-access-link"' in claim_page and link in claim_page


def test_it_downloads_a_kubeconfig_for_the_namespace(in_kubesim: NamespaceRequest) -> None:
    ns = in_kubesim
    response = client_for(ns.owner).post(reverse("namespace-kubeconfig", args=[ns.pk]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    assert response["Cache-Control"] == "no-store"
    filename = f"live-{ns.name}.kubeconfig"
    assert response["Content-Disposition"] == f'attachment; filename="{filename}"'
    config = yaml.safe_load(response.content)
    [context] = config["contexts"]
    assert context["context"]["namespace"] == ns.name
    assert config["current-context"] == context["name"]
    assert config["users"][0]["user"]["token"]
    # The page tells people to use the name the browser saves the file as.
    assert f"kubectl --kubeconfig {filename} get resourceclaims" in page(ns.owner, ns)
    assert "Kubeconfig issued, valid until" in page(ns.owner, ns)


def test_it_shows_the_clusters_refusal_when_the_service_account_is_gone(
    in_kubesim: NamespaceRequest, kubesim_cluster: kubesim.Handle
) -> None:
    ns = in_kubesim
    account = f"/api/v1/namespaces/{ns.name}/serviceaccounts/gpu-portal-alice"
    kubesim_cluster.admin("DELETE", account)
    content = download(ns.owner, ns).content.decode()
    assert "The cluster refused to issue a token:" in content
    assert "not found" in content


def test_it_asks_to_try_again_when_the_cluster_does_not_answer(
    db: None, kubesim_private: kubesim.Handle, alice: User, charlie: User
) -> None:
    cluster = register_cluster(kubesim_private, name="flaky")
    try:
        ns = granted_namespace(cluster, alice, charlie, "flaky-ml")
        fault = {"path": "/token$", "error_rate": 1.0, "error_codes": [503]}
        kubesim_private.admin("POST", "/_kubesim/faults", json=fault)
        content = download(alice, ns).content.decode()
    finally:
        gateways.forget_gateways()
    assert "The cluster did not answer in time; try the download again in a minute." in content
    assert "state-active" in content


def test_it_issues_nothing_on_a_get(active: NamespaceRequest) -> None:
    response = client_for(active.owner).get(reverse("namespace-kubeconfig", args=[active.pk]))
    assert response.status_code == 405


def claim_names(content: str) -> list[str]:
    return re.findall(r'<tr id="claim-\d+">.*?<code>([^<]+)</code>', content, re.S)


def test_it_lists_the_claims_a_page_at_a_time_newest_first(
    namespace: NamespaceRequest,
) -> None:
    """A namespace of thousands of claims keeps its page the size of one page of them; older
    ones are a link away (by position: no count), and every one is in the API's list."""
    ClaimRequest.objects.bulk_create(
        ClaimRequest(
            namespace_request=namespace,
            owner=namespace.owner,
            name=f"c{i:03d}",
            device_class="gpu.nvidia.com",
            state="released",
            applied_manifest={"spec": "x" * 1000},
        )
        for i in range(CLAIMS_SHOWN + 10)
    )
    content = page(namespace.owner, namespace)
    assert claim_names(content) == [f"c{i:03d}" for i in range(CLAIMS_SHOWN + 9, 9, -1)]
    api_list = f"/api/v1/claims/?namespace_request={namespace.pk}&amp;cursor="
    assert f'<a href="{api_list}">' in content
    assert "x" * 1000 not in content
    assert 'rel="first"' not in content
    older = re.search(r'<a rel="next" href="\?(claims_before=[0-9.]+)">', content)
    assert older is not None

    client = client_for(namespace.owner)
    url = reverse("namespace", args=[namespace.pk])
    content = client.get(f"{url}?{older.group(1)}").content.decode()
    assert claim_names(content) == [f"c{i:03d}" for i in range(9, -1, -1)]
    assert '<a rel="first" href="?">' in content and 'rel="next"' not in content
    # Its live updates redraw the same page, not the newest.
    assert f"claims_before={older.group(1).partition('=')[2]}" in watcher_url(content)
    assert client.get(f"{url}?claims_before=nonsense").status_code == 200


def watcher_url(content: str) -> str:
    found = re.search(r'id="namespace-watch"[^>]*hx-get="([^"]+)"', content) or re.search(
        r'hx-get="([^"]+)"[^>]*id="namespace-watch"', content
    )
    assert found is not None
    return found.group(1)


def test_it_says_nothing_of_more_claims_when_all_are_shown(claim: ClaimRequest) -> None:
    content = page(claim.owner, claim.namespace_request)
    assert "train-gpu" in content
    assert 'id="namespace-claims-more"' not in content
