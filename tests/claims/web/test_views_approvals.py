"""The approval queue: only approvers, decisions in place (htmx row swaps), reasons required."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamQuota
from claims.policy import limits
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for, htmx_client_for


def watch_url(page: str) -> str:
    """The approval queue's watcher: the request that waits for the next change."""
    found = re.search(r'id="approvals-watch" hx-get="([^"]+)"', page)
    assert found, "the queue is not live"
    return found.group(1).replace("&amp;", "&")


def test_it_sends_anonymous_visitors_to_login(db: None) -> None:
    response = client_for(None).get(reverse("approvals"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_forbids_the_queue_to_data_scientists(claim: ClaimRequest, bob: User) -> None:
    assert client_for(bob).get(reverse("approvals")).status_code == 403
    assert client_for(claim.owner).get(reverse("approvals")).status_code == 403


def test_it_shows_approvers_what_waits(claim: ClaimRequest, charlie: User) -> None:
    content = client_for(charlie).get(reverse("approvals")).content.decode()
    assert f'id="claim-request-{claim.pk}"' in content
    assert f'id="namespace-request-{claim.namespace_request.pk}"' in content
    assert "Fine-tuning" in content
    assert 'hx-target="closest tr"' in content


def test_it_does_not_let_the_owner_approve_her_own_claim(claim: ClaimRequest) -> None:
    url = reverse("claim-approve", args=[claim.pk])
    assert client_for(claim.owner).post(url).status_code == 403
    claim.refresh_from_db()
    assert claim.state == "pending"


def test_it_links_every_row_to_its_own_decisions(claim: ClaimRequest, charlie: User) -> None:
    content = client_for(charlie).get(reverse("approvals")).content.decode()
    ns = claim.namespace_request
    for name, pk in [
        ("claim-approve", claim.pk),
        ("claim-reject", claim.pk),
        ("namespace-approve", ns.pk),
        ("namespace-reject", ns.pk),
    ]:
        url = reverse(name, args=[pk])
        assert f'action="{url}"' in content and f'hx-post="{url}"' in content
    assert f'<a href="{reverse("claim", args=[claim.pk])}"><code>train-gpu</code></a>' in content


def test_it_redraws_a_pending_row_as_the_queue_shows_it(claim: ClaimRequest, charlie: User) -> None:
    """A row answered alone (a reject without a reason) says what the queue's row says: the
    page words it from what it read once for all its rows."""
    team = Team.objects.create(name="vision")
    team.members.add(claim.owner)
    TeamQuota.objects.create(
        team=team, cluster=claim.cluster, device_class=claim.device_class, max_devices=4
    )
    reject = reverse("claim-reject", args=[claim.pk])
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    row = htmx_client_for(charlie).post(reject, {"reason": ""}).content.decode()
    for part in [
        f'<a href="{reverse("claim", args=[claim.pk])}">',
        f'hx-post="{reverse("claim-approve", args=[claim.pk])}"',
        f'hx-post="{reject}"',
        f'id="claim-feasibility-{claim.pk}"',
        f'id="team-use-{claim.pk}"',
    ]:
        assert part in page and part in row, part


def test_it_approves_a_claim_in_place(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-approve", args=[claim.pk])
    response = htmx_client_for(charlie).post(url)
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith(f'<tr id="claim-request-{claim.pk}"')
    assert "state-approved" in content
    assert "by charlie" in content
    claim.refresh_from_db()
    assert claim.state == "approved"


def test_it_updates_the_namespace_row_approved_with_the_claim(
    claim: ClaimRequest, charlie: User
) -> None:
    url = reverse("claim-approve", args=[claim.pk])
    content = htmx_client_for(charlie).post(url).content.decode()
    # The live queue redraws the namespace row; an out-of-band row would miss when it is not
    # on the page (htmx:oobErrorNoTarget).
    assert "namespace-request-" not in content
    assert NamespaceRequest.objects.get().state == "approved"


def test_it_rejects_a_claim_with_a_reason(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-reject", args=[claim.pk])
    content = htmx_client_for(charlie).post(url, {"reason": "Use the A100s"}).content.decode()
    assert "state-rejected" in content
    assert "Use the A100s" in content
    claim.refresh_from_db()
    assert (claim.state, claim.state_message) == ("rejected", "Use the A100s")


def test_it_asks_for_a_reason_next_to_the_field(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-reject", args=[claim.pk])
    response = htmx_client_for(charlie).post(url, {"reason": "  "})
    assert response.status_code == 200
    content = response.content.decode()
    assert 'class="field has-error"' in content
    assert "Say why, so the requester knows what to change." in content
    claim.refresh_from_db()
    assert claim.state == "pending"


def test_it_says_when_someone_else_decided_first(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-approve", args=[claim.pk])
    client = htmx_client_for(charlie)
    client.post(url)
    response = client.post(url)
    assert response.status_code == 200
    assert "train-gpu is already approved." in response.content.decode()


def test_it_approves_a_namespace_in_place(namespace: NamespaceRequest, charlie: User) -> None:
    url = reverse("namespace-approve", args=[namespace.pk])
    content = htmx_client_for(charlie).post(url).content.decode()
    assert content.lstrip().startswith(f'<tr id="namespace-request-{namespace.pk}"')
    assert "state-approved" in content
    namespace.refresh_from_db()
    assert namespace.state == "approved"


def test_it_rejects_a_namespace_and_its_claims(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("namespace-reject", args=[claim.namespace_request.pk])
    htmx_client_for(charlie).post(url, {"reason": "Wrong team"})
    claim.refresh_from_db()
    assert claim.namespace_request.state == "rejected"
    assert claim.state == "rejected"


def test_it_falls_back_to_a_redirect_without_javascript(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-reject", args=[claim.pk])
    response = client_for(charlie).post(url, {"reason": ""}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("approvals")
    assert "train-gpu: Say why" in response.content.decode()


def test_it_answers_404_for_an_unknown_request(charlie: User) -> None:
    url = reverse("claim-approve", args=[999])
    assert htmx_client_for(charlie).post(url).status_code == 404


def test_it_refuses_get_on_decisions(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("claim-approve", args=[claim.pk])
    assert client_for(charlie).get(url).status_code == 405


def test_it_answers_a_decision_with_the_row_alone(claim: ClaimRequest, charlie: User) -> None:
    url = reverse("namespace-reject", args=[claim.namespace_request.pk])
    content = htmx_client_for(charlie).post(url, {"reason": "No"}).content.decode()
    assert "hx-swap-oob" not in content  # the live queue redraws the rest


def test_it_updates_the_waiting_count_in_the_menu(
    namespace: NamespaceRequest, charlie: User
) -> None:
    services.namespace_request_submit(user=namespace.owner, cluster=namespace.cluster, name="other")
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    assert '<span class="badge warn" id="pending-approvals">2</span>' in page
    services.namespace_request_approve(user=charlie, namespace_request=namespace)
    content = htmx_client_for(charlie).get(watch_url(page)).content.decode()
    assert '<span id="approvals-count" hx-swap-oob="true"> <span class="badge warn"' in content
    assert 'id="pending-approvals">1</span>' in content


def test_it_shows_a_new_request_to_the_open_queue(
    namespace: NamespaceRequest, charlie: User
) -> None:
    page = client_for(charlie).get(reverse("approvals") + "?kind=namespace").content.decode()
    services.namespace_request_submit(
        user=namespace.owner, cluster=namespace.cluster, name="new-ml"
    )
    content = htmx_client_for(charlie).get(watch_url(page)).content.decode()
    assert '<section class="card" id="namespace-queue" hx-swap-oob="true"' in content
    assert "<code>new-ml</code>" in content
    assert "kind=namespace" in content  # the next wait keeps the filter
    assert 'id="claim-queue"' not in content  # unchanged parts are not sent


def test_it_keeps_a_seen_row_with_its_decision(namespace: NamespaceRequest, charlie: User) -> None:
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    services.namespace_request_reject(user=charlie, namespace_request=namespace, reason="No room")
    content = htmx_client_for(charlie).get(watch_url(page)).content.decode()
    assert f'<tr id="namespace-request-{namespace.pk}" data-state="rejected">' in content
    assert "by charlie: No room" in content


def test_it_says_who_approved_apart_from_what_the_claim_is_now(
    claim: ClaimRequest, charlie: User
) -> None:
    """The approver decided; they do not use the claim ("ready · not in use by charlie")."""
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    services.claim_request_approve(user=charlie, claim_request=claim)
    transition(claim, to="waiting", allowed=("approved",))
    content = htmx_client_for(charlie).get(watch_url(page)).content.decode()
    row = re.search(rf'<tr id="claim-request-{claim.pk}".*?</tr>', content, re.S)
    assert row, "the decided row left the queue"
    words = " ".join(re.sub(r"<[^>]+>", " ", row.group(0)).split())
    assert "approved by charlie · now ready · not in use" in words
    assert "not in use by charlie" not in words


@pytest.mark.parametrize("reason", ["", "x" * 2000, "nul\x00byte"])
def test_it_answers_a_malformed_reason_next_to_the_field(
    claim: ClaimRequest, charlie: User, reason: str
) -> None:
    url = reverse("claim-reject", args=[claim.pk])
    response = htmx_client_for(charlie).post(url, {"reason": reason})
    assert response.status_code == 200
    assert 'class="field has-error"' in response.content.decode()
    claim.refresh_from_db()
    assert claim.state == "pending"


@pytest.mark.parametrize("name", ["namespace-approve", "claim-reject"])
def test_it_answers_404_for_a_malformed_id(charlie: User, name: str) -> None:
    url = reverse(name, args=[1]).replace("/1/", "/99999999999999999999/")
    assert client_for(charlie).post(url, {"reason": "No"}).status_code == 404


def pending_claims(namespace: NamespaceRequest, how_many: int, first: int = 0) -> None:
    start = timezone.now()
    ClaimRequest.objects.bulk_create(
        ClaimRequest(
            namespace_request=namespace,
            owner=namespace.owner,
            name=f"c{i}",
            device_class="gpu.nvidia.com",
            count=1,
            purpose="p" * 5000,
            created=start + timedelta(seconds=i),
        )
        for i in range(first, first + how_many)
    )


def test_it_lists_a_page_of_the_oldest_requests_when_many_wait(
    namespace: NamespaceRequest, charlie: User
) -> None:
    pending_claims(namespace, 1500)
    response = client_for(charlie).get(reverse("approvals"))
    content = response.content.decode()
    size = limits.APPROVALS_PAGE_SIZE
    assert content.count('<tr id="claim-request-') == size
    assert ">c0<" in content and f">c{size - 1}<" in content and f">c{size}<" not in content
    assert 'rel="next"' in content and 'rel="prev"' not in content
    assert "Showing" not in content and "of 1500" not in content  # no count of the queue
    # Each purpose is cut short here (the claim's page shows all of it).
    assert len(response.content) < 150_000


def test_it_keeps_the_page_the_same_size_as_the_queue_grows(
    namespace: NamespaceRequest, charlie: User
) -> None:
    pending_claims(namespace, 60)
    few = len(client_for(charlie).get(reverse("approvals")).content)
    pending_claims(namespace, 1000, first=60)
    many = len(client_for(charlie).get(reverse("approvals")).content)
    assert many < few * 1.05


def test_it_answers_htmx_with_the_queue_only(namespace: NamespaceRequest, charlie: User) -> None:
    client = Client(headers={"HX-Request": "true", "HX-Target": "approval-queue"})
    client.force_login(charlie)
    content = client.get(reverse("approvals") + "?kind=namespace").content.decode()
    assert content.lstrip().startswith('<div id="approval-queue">')
    assert f'id="namespace-request-{namespace.pk}"' in content
    assert "<html" not in content


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("", {"ns-alice", "ns-bob", "alice-a100", "bob-h100"}),
        ("?kind=namespace", {"ns-alice", "ns-bob"}),
        ("?kind=claim", {"alice-a100", "bob-h100"}),
        ("?requester=bob", {"ns-bob", "bob-h100"}),
        ("?device_class=a100.example.com", {"alice-a100"}),
        ("?cluster=other", {"ns-bob", "bob-h100"}),
        ("?cluster=nonsense&kind=sideways", {"ns-alice", "ns-bob", "alice-a100", "bob-h100"}),
    ],
)
def test_it_filters_the_queue(
    cluster: Cluster, alice: User, bob: User, charlie: User, query: str, shown: set[str]
) -> None:
    other = Cluster.objects.create(name="other", inventory=cluster.inventory)
    ns_alice = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="ns-alice")
    ns_bob = NamespaceRequest.objects.create(owner=bob, cluster=other, name="ns-bob")
    rows = {ns.name: f'id="namespace-request-{ns.pk}"' for ns in (ns_alice, ns_bob)}
    for ns, name, device_class in [
        (ns_alice, "alice-a100", "a100.example.com"),
        (ns_bob, "bob-h100", "gpu.nvidia.com"),
    ]:
        claim = ClaimRequest.objects.create(
            namespace_request=ns, owner=ns.owner, name=name, device_class=device_class, count=1
        )
        rows[name] = f'id="claim-request-{claim.pk}"'
    query = query.replace("=other", f"={other.pk}")
    content = client_for(charlie).get(reverse("approvals") + query).content.decode()
    assert {name for name, row in rows.items() if row in content} == shown


def test_it_reads_a_page_of_the_queue_in_a_few_queries(
    namespace: NamespaceRequest, charlie: User, django_assert_max_num_queries: Any
) -> None:
    pending_claims(namespace, 50)
    for i in range(50):
        NamespaceRequest.objects.create(
            owner=namespace.owner, cluster=namespace.cluster, name=f"n{i}"
        )
    client = client_for(charlie)
    # Not per row: session, user, approver, the live version (Redis's count outside a
    # test's transaction), clusters, teams (the filter's choices), the menu's bounded count,
    # the two pages (with the owners' teams), allocations, the claims waiting for devices.
    with django_assert_max_num_queries(11):
        response = client.get(reverse("approvals"))
    content = response.content.decode()
    size = limits.APPROVALS_PAGE_SIZE
    assert content.count('<tr id="claim-request-') == size
    assert content.count('<tr id="namespace-request-') == size
    assert "Can be satisfied" in content


@pytest.mark.django_db(transaction=True)
def test_it_reads_a_page_of_the_queue_in_ten_queries_where_redis_keeps_the_version(
    namespace: NamespaceRequest, charlie: User, django_assert_max_num_queries: Any
) -> None:
    pending_claims(namespace, 50)
    client = client_for(charlie)
    client.get(reverse("approvals"))
    # Outside a transaction (as in production) the version is Redis's count of changes.
    with django_assert_max_num_queries(10):
        response = client.get(reverse("approvals"))
    assert response.content.decode().count('<tr id="claim-request-') == limits.APPROVALS_PAGE_SIZE


def test_it_counts_the_whole_queue_in_the_menu_when_filtered(
    namespace: NamespaceRequest, charlie: User
) -> None:
    pending_claims(namespace, 3)
    content = client_for(charlie).get(reverse("approvals") + "?kind=claim").content.decode()
    assert '<span class="badge warn" id="pending-approvals">4</span>' in content
