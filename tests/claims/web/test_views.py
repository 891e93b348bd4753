"""Personas and data shared by the view tests, and the dashboard and login pages."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from claims.domain import services
from claims.live import changes
from claims.models import ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.read.selectors import APPROVERS_GROUP
from tests.fixtures.portal import wait_until

# The other view test modules take these fixtures with `import *`.
__all__ = ["alice", "bob", "charlie", "claim", "cluster", "namespace"]

PASSWORD = "correct-horse-battery"
GPU_CLASS = "gpu.nvidia.com"


def h100(index: int, node: str = "gpu-node-1") -> dict[str, Any]:
    return {
        "node": node,
        "driver": GPU_CLASS,
        "pool": node,
        "name": f"gpu-{index}",
        "attributes": {
            "type": "gpu",
            "productName": "NVIDIA H100 80GB HBM3",
            "cudaComputeCapability": "9.0.0",
            "uuid": f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        },
        "capacity": {"memory": "80Gi"},
    }


INVENTORY = {
    "device_classes": [
        {
            "name": GPU_CLASS,
            "selectors": ["device.driver == 'gpu.nvidia.com'"],
        },
        {"name": "mig.nvidia.com", "selectors": []},
    ],
    "devices": [h100(0), h100(1)],
    "device_counts": {GPU_CLASS: 2, "mig.nvidia.com": 0},
}


@pytest.fixture
def cluster(db: None) -> Cluster:
    return Cluster.objects.create(
        name="kubesim",
        simulated=True,
        server_version="v1.34.1",
        resource_versions=["v1", "v1beta2", "v1beta1"],
        preferred_resource_version="v1",
        inventory=INVENTORY,
    )


def _user(username: str) -> User:
    # No password hashing here (it is slow by design); tests log in with force_login.
    return User.objects.create(username=username, email=f"{username}@example.org")


@pytest.fixture
def alice(db: None) -> User:
    """A data scientist who owns the requests in these tests."""
    return _user("alice")


@pytest.fixture
def bob(db: None) -> User:
    """Another data scientist: must not see alice's things."""
    return _user("bob")


@pytest.fixture
def charlie(db: None) -> User:
    """An approver."""
    user = _user("charlie")
    user.groups.add(Group.objects.get_or_create(name=APPROVERS_GROUP)[0])
    return user


def client_for(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def htmx_client_for(user: User) -> Client:
    client = Client(headers={"HX-Request": "true"})
    client.force_login(user)
    return client


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(
        user=alice, cluster=cluster, name="alice-ml", purpose="Training"
    )


@pytest.fixture
def claim(alice: User, namespace: NamespaceRequest) -> ClaimRequest:
    return services.claim_request_submit(
        user=alice,
        namespace_request=namespace,
        name="train-gpu",
        device_class=GPU_CLASS,
        count=1,
        purpose="Fine-tuning",
    )


def test_it_redirects_anonymous_visitors_to_login(db: None) -> None:
    response = client_for(None).get(reverse("dashboard"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_logs_in_with_the_form(alice: User) -> None:
    alice.set_password(PASSWORD)
    alice.save()
    client = Client()
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("dashboard")).status_code == 200


def test_it_shows_a_wrong_password_on_the_login_page(alice: User) -> None:
    response = Client().post(reverse("login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_it_shows_the_owner_her_claims_with_state_badges(claim: ClaimRequest) -> None:
    response = client_for(claim.owner).get(reverse("dashboard"))
    assert response.status_code == 200
    content = response.content.decode()
    assert "train-gpu" in content
    assert "alice-ml" in content
    assert 'class="badge warn state-pending"' in content


def test_it_hides_alices_claims_from_bob(claim: ClaimRequest, bob: User) -> None:
    content = client_for(bob).get(reverse("dashboard")).content.decode()
    assert "train-gpu" not in content
    assert "alice-ml" not in content


def test_it_shows_an_approver_everyones_claims(claim: ClaimRequest, charlie: User) -> None:
    content = client_for(charlie).get(reverse("dashboard")).content.decode()
    assert "train-gpu" in content
    assert "All requests" in content
    assert reverse("approvals") in content


def test_it_says_the_cluster_is_simulated(claim: ClaimRequest) -> None:
    content = client_for(claim.owner).get(reverse("dashboard")).content.decode()
    assert 'id="simulated-banner"' in content


def test_it_serves_only_the_live_part_to_htmx_polls(claim: ClaimRequest) -> None:
    response = htmx_client_for(claim.owner).get(reverse("dashboard"))
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<div id="dashboard-live"')
    assert 'hx-trigger="every 1s"' in content
    assert "<html" not in content


def reject_everything(claim: ClaimRequest, approver: User) -> None:
    services.claim_request_reject(user=approver, claim_request=claim, reason="No budget")
    services.namespace_request_reject(
        user=approver, namespace_request=claim.namespace_request, reason="No budget"
    )


def poll_url(live_part: str) -> str:
    return live_part.split('hx-get="', 1)[1].split('"', 1)[0].replace("&amp;", "&")


def test_it_keeps_polling_slowly_when_everything_is_final(
    claim: ClaimRequest, charlie: User
) -> None:
    reject_everything(claim, charlie)
    response = htmx_client_for(claim.owner).get(reverse("dashboard"))
    assert response.status_code == 200
    content = response.content.decode()
    assert 'hx-trigger="every 5s"' in content
    assert "?seen=" in poll_url(content)


def test_it_shows_a_namespace_made_in_another_tab_at_the_next_poll(
    claim: ClaimRequest, charlie: User
) -> None:
    reject_everything(claim, charlie)
    client = htmx_client_for(claim.owner)
    url = poll_url(client.get(reverse("dashboard")).content.decode())
    services.namespace_request_submit(user=claim.owner, cluster=claim.cluster, name="new-tab")
    response = client.get(url)
    assert response.status_code == 200
    assert "new-tab" in response.content.decode()


def test_it_shows_a_state_change_at_the_next_poll(claim: ClaimRequest, charlie: User) -> None:
    client = htmx_client_for(claim.owner)
    url = poll_url(client.get(reverse("dashboard")).content.decode())
    services.claim_request_reject(user=charlie, claim_request=claim, reason="No budget")
    content = client.get(url).content.decode()
    assert 'class="badge bad state-rejected"' in content


@override_settings(LIVE_WAIT_SECONDS=0)
def test_it_answers_an_unchanged_poll_with_no_content(
    claim: ClaimRequest, django_assert_max_num_queries: Any
) -> None:
    client = htmx_client_for(claim.owner)
    url = poll_url(client.get(reverse("dashboard")).content.decode())
    # Session, user, approver check and one look at the glance (once subscribed): no lists,
    # no rendering, no second look before or after the wait.
    with django_assert_max_num_queries(4):
        response = client.get(url)
    assert response.status_code == 204
    assert response.content == b""


@pytest.mark.django_db(transaction=True)
@override_settings(LIVE_WAIT_SECONDS=0)
def test_an_idle_poll_asks_redis_not_the_rows_where_nothing_changed(
    claim: ClaimRequest, charlie: User, django_assert_max_num_queries: Any
) -> None:
    client = htmx_client_for(charlie)
    url = poll_url(client.get(reverse("dashboard")).content.decode())
    # Session, user and the approver check: the glance is kept for the scope's version.
    with django_assert_max_num_queries(3):
        assert client.get(url).status_code == 204
    services.claim_request_reject(user=charlie, claim_request=claim, reason="No budget")
    assert client.get(url).status_code == 200  # the change was announced: a new glance


@pytest.mark.django_db(transaction=True)
def test_an_unchanged_poll_waits_for_the_next_change_and_answers_it(
    claim: ClaimRequest, charlie: User
) -> None:
    client = htmx_client_for(claim.owner)
    url = poll_url(client.get(reverse("dashboard")).content.decode())

    def reject_soon() -> None:
        wait_until(changes.waiters.waiting, timeout=30)  # the change comes after it looked
        services.claim_request_reject(user=charlie, claim_request=claim, reason="No budget")
        connection.close()

    rejecter = threading.Thread(target=reject_soon)
    rejecter.start()
    with override_settings(LIVE_WAIT_SECONDS=30):
        response = client.get(url)  # waits until the rejection is announced
    rejecter.join()
    assert response.status_code == 200
    assert 'class="badge bad state-rejected"' in response.content.decode()


def test_it_links_api_tokens_and_api_docs_from_the_menu(alice: User) -> None:
    content = client_for(alice).get(reverse("dashboard")).content.decode()
    assert f'<a href="{reverse("api-tokens")}"' in content
    assert '<a href="/api/docs/"' in content


def test_it_refuses_a_form_post_without_its_csrf_token(namespace: NamespaceRequest) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(namespace.owner)
    response = client.post(reverse("namespace-request"), {"name": "other-ns"})
    assert response.status_code == 403
    assert NamespaceRequest.objects.count() == 1


def test_it_lets_htmx_send_the_token_from_the_body_headers(namespace: NamespaceRequest) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(namespace.owner)
    page = client.get(reverse("claim-request")).content.decode()
    token = page.split('hx-headers=\'{"X-CSRFToken": "', 1)[1].split('"', 1)[0]
    data = {"namespace_request": namespace.pk, "name": "x", "device_class": GPU_CLASS}
    response = client.post(
        reverse("claim-preview"), data, headers={"HX-Request": "true", "X-CSRFToken": token}
    )
    assert response.status_code == 200
    assert "kind: ResourceClaim" in response.content.decode()


def test_it_explains_a_forbidden_page_in_the_layout(settings: Any, alice: User) -> None:
    settings.DEBUG = False
    response = client_for(alice).get(reverse("approvals"))
    assert response.status_code == 403
    assert "Only approvers see the approval queue." in response.content.decode()


def test_it_sends_a_poll_after_logout_to_the_login_page(claim: ClaimRequest) -> None:
    anonymous_htmx = Client(headers={"HX-Request": "true", "HX-Current-URL": "http://x/claims/1/"})
    response = anonymous_htmx.get(reverse("claim", args=[claim.pk]))
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("login") + "?next=/claims/1/"
    assert response.content == b""


def test_it_tells_approvers_how_many_requests_wait(claim: ClaimRequest, charlie: User) -> None:
    content = client_for(charlie).get(reverse("dashboard")).content.decode()
    assert '<span class="badge warn" id="pending-approvals">2</span>' in content


def many_rows(claim: ClaimRequest, how_many: int) -> None:
    """Namespaces, claims and runs of alice's, enough that a query per row would show."""
    ns = claim.namespace_request
    for i in range(how_many):
        other = NamespaceRequest.objects.create(owner=ns.owner, cluster=ns.cluster, name=f"n{i}")
        more = ClaimRequest.objects.create(
            owner=ns.owner, namespace_request=other, name=f"c{i}", device_class=GPU_CLASS
        )
        VerificationRun.objects.create(claim=more, owner=ns.owner)


@pytest.mark.parametrize("who", ["alice", "charlie"])
def test_it_reads_the_dashboard_in_a_few_queries(
    claim: ClaimRequest, charlie: User, who: str, django_assert_max_num_queries: Any
) -> None:
    many_rows(claim, 50)
    client = client_for(User.objects.get(username=who))
    # Not per row: session, user, language (its profile, in a savepoint), approver, glance,
    # the three lists, clusters, and the user's team memberships (for the glance and the rows).
    with django_assert_max_num_queries(14):
        content = client.get(reverse("dashboard")).content.decode()
    assert content.count('<tr id="claim-') == 50
    assert content.count('<tr id="run-') == 50
