"""The approval queue in pages: by position (no count of the queue), filtered by team,
device class and age, each filter answered next to its field when it does not parse."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamMembership
from claims.policy import limits
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for, htmx_client_for
from tests.claims.web.test_views_approvals import watch_url

SIZE = limits.APPROVALS_PAGE_SIZE


def add_claims(
    namespace: NamespaceRequest,
    how_many: int,
    *,
    hours_ago: float = 0,
    device_class: str = "gpu.nvidia.com",
    prefix: str = "c",
    same_time: bool = False,
) -> list[ClaimRequest]:
    """Pending claims, oldest first (all at one instant with same_time: ordered by id)."""
    start = timezone.now() - timedelta(hours=hours_ago)
    return ClaimRequest.objects.bulk_create(
        ClaimRequest(
            namespace_request=namespace,
            owner=namespace.owner,
            name=f"{prefix}{i}",
            device_class=device_class,
            count=1,
            created=start if same_time else start + timedelta(milliseconds=i),
        )
        for i in range(how_many)
    )


def claim_names(page: str) -> list[str]:
    rows = re.findall(r'<tr id="claim-request-\d+".*?<code>([^<]+)</code>', page, re.S)
    return rows


def link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a rel="{rel}" href="([^"]+)"', page)
    return reverse("approvals") + found.group(1).replace("&amp;", "&") if found else None


def walk(client: Any, url: str, rel: str) -> list[list[str]]:
    """The claim names of every page from url on, following the rel links."""
    pages: list[list[str]] = []
    next_url: str | None = url
    while next_url:
        page = client.get(next_url).content.decode()
        pages.append(claim_names(page))
        next_url = link(page, rel)
        assert len(pages) < 50, "the links go round"
    return pages


@pytest.mark.parametrize("same_time", [False, True])
def test_it_shows_every_request_once_in_order_going_forward_and_back(
    namespace: NamespaceRequest, charlie: User, same_time: bool
) -> None:
    """Rows submitted in the same instant too: the order is (created, id), stable."""
    created = add_claims(namespace, SIZE * 2 + 3, same_time=same_time)
    client = client_for(charlie)
    forward = walk(client, reverse("approvals") + "?kind=claim", "next")
    assert [len(page) for page in forward] == [SIZE, SIZE, 3]
    expected = [claim.name for claim in sorted(created, key=lambda c: (c.created, c.pk))]
    assert [name for page in forward for name in page] == expected
    last = client.get(reverse("approvals") + "?kind=claim").content.decode()
    for _ in range(2):
        last = client.get(link(last, "next")).content.decode()
    assert link(last, "next") is None
    back = walk(client, link(last, "prev") or "", "prev")
    assert back == forward[-2::-1]


def test_it_offers_no_previous_page_on_the_first_and_no_next_on_a_short_queue(
    namespace: NamespaceRequest, charlie: User
) -> None:
    add_claims(namespace, 3)
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    assert claim_names(page) == ["c0", "c1", "c2"]
    assert 'rel="next"' not in page and 'rel="prev"' not in page


def test_it_names_the_page_links_for_a_screen_reader(
    namespace: NamespaceRequest, charlie: User
) -> None:
    add_claims(namespace, SIZE + 1)
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    nav = re.search(r'<nav class="pages" id="claim-requests-shown"[^>]*>.*?</nav>', page, re.S)
    assert nav, "no page links"
    assert 'aria-label="Pages of GPU claim requests"' in nav.group(0)
    assert ">Next page (newer requests)</a>" in nav.group(0)
    second = client_for(charlie).get(link(page, "next")).content.decode()
    assert ">Previous page (older requests)</a>" in second
    assert claim_names(second) == [f"c{SIZE}"]


def test_it_keeps_the_filters_and_the_other_kinds_page_in_the_links(
    namespace: NamespaceRequest, charlie: User
) -> None:
    add_claims(namespace, SIZE * 2 + 1, hours_ago=5)
    url = reverse("approvals") + "?older_than=2&device_class=gpu.nvidia.com"
    second = client_for(charlie).get(link(client_for(charlie).get(url).content.decode(), "next"))
    content = second.content.decode()
    following = link(content, "next") or ""
    assert "older_than=2" in following and "device_class=gpu.nvidia.com" in following
    assert following.count("claim_after=") == 1 and "claim_before" not in following
    assert "since=" not in following and "shown_claims" not in following


@pytest.mark.django_db(transaction=True)
def test_it_reads_a_page_without_counting_the_queue(
    namespace: NamespaceRequest, charlie: User
) -> None:
    add_claims(namespace, 300)
    client = client_for(charlie)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("approvals")).content.decode()
    counted = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    # Only the menu's count, bounded: it stops at 100 of each kind. (Outside a transaction,
    # as in production, the live version is Redis's count of changes, not the tables'.)
    assert all("LIMIT 100" in sql for sql in counted), counted
    assert '<span class="badge warn" id="pending-approvals">99+</span>' in page


def test_it_keeps_the_page_in_the_live_updates(namespace: NamespaceRequest, charlie: User) -> None:
    add_claims(namespace, SIZE + 2)
    client = client_for(charlie)
    second_url = link(client.get(reverse("approvals")).content.decode(), "next") or ""
    second = client.get(second_url).content.decode()
    assert claim_names(second) == [f"c{SIZE}", f"c{SIZE + 1}"]
    watcher = watch_url(second)
    assert "claim_after=" in watcher
    first_claim = ClaimRequest.objects.get(name=f"c{SIZE}")
    services.claim_request_reject(user=charlie, claim_request=first_claim, reason="No")
    redrawn = htmx_client_for(charlie).get(watcher).content.decode()
    # The page stays the second: its rejected row stays, with its decision; no first-page row.
    assert claim_names(redrawn) == [f"c{SIZE}", f"c{SIZE + 1}"]
    assert f'<tr id="claim-request-{first_claim.pk}" data-state="rejected">' in redrawn
    assert "claim_after=" in watch_url(redrawn)


def team_of(name: str, *members: User) -> Team:
    team = Team.objects.create(name=name)
    for member in members:
        TeamMembership.objects.create(team=team, user=member)
    return team


@pytest.fixture
def mixed(cluster: Cluster, alice: User, bob: User) -> dict[str, Any]:
    """alice (team vision) and bob (team nlp), each with claims of two ages and classes."""
    vision, nlp = team_of("vision", alice), team_of("nlp", bob)
    for owner in (alice, bob):
        ns = NamespaceRequest.objects.create(owner=owner, cluster=cluster, name=f"{owner}-ns")
        add_claims(ns, 1, hours_ago=30, prefix=f"{owner}-old-gpu")
        add_claims(ns, 1, hours_ago=30, prefix=f"{owner}-old-mig", device_class="mig.nvidia.com")
        add_claims(ns, 1, prefix=f"{owner}-new-gpu")
    return {"vision": vision, "nlp": nlp}


def named(owners: str, kinds: str) -> set[str]:
    return {f"{owner}-{kind}" for owner in owners.split() for kind in kinds.split()}


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("", named("alice bob", "old-gpu old-mig new-gpu")),
        ("team=vision", named("alice", "old-gpu old-mig new-gpu")),
        ("older_than=24", named("alice bob", "old-gpu old-mig")),
        ("device_class=mig.nvidia.com", named("alice bob", "old-mig")),
        ("team=nlp&older_than=24&device_class=gpu.nvidia.com", named("bob", "old-gpu")),
        ("older_than=48", set()),
    ],
    ids=["none", "team", "age", "class", "combined", "too-old"],
)
def test_it_filters_by_team_class_and_age(
    mixed: dict[str, Any], charlie: User, query: str, shown: set[str]
) -> None:
    query = re.sub(r"team=(\w+)", lambda m: f"team={mixed[m.group(1)].pk}", query)
    page = client_for(charlie).get(f"{reverse('approvals')}?kind=claim&{query}").content.decode()
    assert {name.removesuffix("0") for name in claim_names(page)} == shown
    assert "has-error" not in page


@pytest.mark.parametrize(
    ("query", "field", "error"),
    [
        ("older_than=abc", "older_than", "Enter a whole number."),
        ("older_than=0", "older_than", "greater than or equal to 1"),
        ("older_than=-3", "older_than", "greater than or equal to 1"),
        ("older_than=99999999999999999999", "older_than", "less than or equal to 8784"),
        ("team=nonsense", "team", "Select a valid choice."),
        ("team=999999", "team", "Select a valid choice."),
        ("cluster=x", "cluster", "Select a valid choice."),
        ("requester=" + "x" * 151, "requester", "at most 150 characters"),
    ],
)
def test_it_answers_a_bad_filter_next_to_its_field_and_narrows_nothing(
    mixed: dict[str, Any], charlie: User, query: str, field: str, error: str
) -> None:
    response = client_for(charlie).get(f"{reverse('approvals')}?kind=claim&{query}")
    assert response.status_code == 200
    page = response.content.decode()
    box = re.search(rf'<div class="field has-error" id="filter-{field}">.*?</div>', page, re.S)
    assert box and error in box.group(0), page
    assert "A filter with an error narrows nothing until it is corrected." in page
    assert len(claim_names(page)) == 6


@pytest.mark.parametrize(
    "query", ["claim_after=garbage", "claim_before=1.x", "ns_after=9" * 30, "claim_after=%C2%B2.1"]
)
def test_it_shows_the_first_page_for_a_page_link_it_did_not_make(
    namespace: NamespaceRequest, charlie: User, query: str
) -> None:
    add_claims(namespace, SIZE + 1)
    response = client_for(charlie).get(f"{reverse('approvals')}?{query}")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="unknown-page"' in page
    assert claim_names(page)[0] == "c0"


def test_it_offers_a_team_approver_their_teams_only(
    mixed: dict[str, Any], cluster: Cluster, alice: User
) -> None:
    lead = User.objects.create(username="lead")
    TeamMembership.objects.create(team=mixed["vision"], user=lead, role="approver")
    client = client_for(lead)
    page = client.get(reverse("approvals") + "?kind=claim").content.decode()
    assert ">vision</option>" in page and ">nlp</option>" not in page
    assert {name.split("-")[0] for name in claim_names(page)} == {"alice"}
    other = client.get(f"{reverse('approvals')}?kind=claim&team={mixed['nlp'].pk}")
    assert '<div class="field has-error" id="filter-team">' in other.content.decode()
    assert {name.split("-")[0] for name in claim_names(other.content.decode())} == {"alice"}


def test_it_shows_a_team_approver_no_other_teams_row_through_the_watcher(
    mixed: dict[str, Any], alice: User
) -> None:
    """The rows "seen before" a live update keeps are the approver's to decide, whatever
    ids the watcher's URL holds."""
    lead = User.objects.create(username="lead")
    TeamMembership.objects.create(team=mixed["vision"], user=lead, role="approver")
    bobs = ClaimRequest.objects.filter(owner__username="bob")
    watcher = watch_url(client_for(lead).get(reverse("approvals")).content.decode())
    bob_ids = ",".join(str(claim.pk) for claim in bobs)
    watcher = re.sub(r"shown_claims=[^&]*", f"shown_claims={bob_ids}", watcher)
    watcher = re.sub(r"(?<=[?&])claims=[^&]*&?", "", watcher)  # send the claims part again
    page = htmx_client_for(lead).get(watcher.replace("since=", "since=stale")).content.decode()
    assert {name.split("-")[0] for name in claim_names(page)} == {"alice"}
