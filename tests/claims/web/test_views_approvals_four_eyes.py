"""The approval queue and four-eyes: an approver sees, before any click, which requests they
may not approve themselves and why; an approval sent anyway is answered on the row."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from claims.domain import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamMembership
from claims.read.selectors import APPROVERS_GROUP
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import GPU_CLASS, client_for, htmx_client_for

OWN = "Your own request: another approver must approve it (four-eyes)."
NOBODY_ELSE = "No other approver exists yet"


def text_of(html: str) -> str:
    """What a reader sees: the tags dropped, the spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def row_of(page: str, row_id: str) -> str:
    found = re.search(rf'<tr id="{row_id}".*?</tr>', page, re.S)
    assert found, f"no row {row_id}"
    return found.group(0)


@pytest.fixture
def own_claim(charlie: User, cluster: Cluster) -> ClaimRequest:
    """A request of the approver's own, pending with its namespace."""
    ns = services.namespace_request_submit(user=charlie, cluster=cluster, name="charlie-ml")
    return services.claim_request_submit(
        user=charlie, namespace_request=ns, name="mine", device_class=GPU_CLASS, count=1
    )


def test_it_offers_no_approval_of_ones_own_requests_and_says_why(
    own_claim: ClaimRequest, claim: ClaimRequest, charlie: User
) -> None:
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    own_rows = {
        f"claim-request-{own_claim.pk}": reverse("claim-approve", args=[own_claim.pk]),
        f"namespace-request-{own_claim.namespace_request_id}": reverse(
            "namespace-approve", args=[own_claim.namespace_request_id]
        ),
    }
    for row_id, approve_url in own_rows.items():
        row = row_of(page, row_id)
        assert approve_url not in row and ">Approve<" not in row
        assert OWN in text_of(row)
        assert NOBODY_ELSE in text_of(row)  # charlie is the only approver
    others = row_of(page, f"claim-request-{claim.pk}")
    assert reverse("claim-approve", args=[claim.pk]) in others
    assert "four-eyes" not in others


def test_it_counts_a_request_submitted_on_someone_elses_behalf_as_ones_own(
    charlie: User, namespace: NamespaceRequest
) -> None:
    for_alice = services.claim_request_submit(
        user=charlie, namespace_request=namespace, name="for-alice", device_class=GPU_CLASS
    )
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    row = row_of(page, f"claim-request-{for_alice.pk}")
    assert for_alice.owner == namespace.owner
    assert OWN in text_of(row)
    assert reverse("claim-approve", args=[for_alice.pk]) not in row


def test_it_names_no_missing_approver_when_another_one_may_approve(
    own_claim: ClaimRequest, charlie: User
) -> None:
    other = User.objects.create(username="dora")
    other.groups.add(Group.objects.get(name=APPROVERS_GROUP))
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    row = text_of(row_of(page, f"claim-request-{own_claim.pk}"))
    assert OWN in row
    assert NOBODY_ELSE not in row


def test_it_counts_a_team_approver_of_the_owners_team_as_another_approver(
    own_claim: ClaimRequest, charlie: User
) -> None:
    team = Team.objects.create(name="vision")
    team.members.add(charlie)
    dora = User.objects.create(username="dora")
    TeamMembership.objects.create(team=team, user=dora, role=TeamMembership.Role.APPROVER)
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    assert NOBODY_ELSE not in text_of(row_of(page, f"claim-request-{own_claim.pk}"))


def test_it_offers_approval_of_ones_own_requests_where_self_approval_is_allowed(
    own_claim: ClaimRequest, charlie: User, settings: Any
) -> None:
    settings.ALLOW_SELF_APPROVAL = True
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    row = row_of(page, f"claim-request-{own_claim.pk}")
    assert reverse("claim-approve", args=[own_claim.pk]) in row
    assert "four-eyes" not in row


def test_it_still_lets_an_approver_reject_their_own_request(
    own_claim: ClaimRequest, charlie: User
) -> None:
    """Four-eyes guards approvals only: rejecting one's own request is a withdrawal."""
    page = client_for(charlie).get(reverse("approvals")).content.decode()
    assert reverse("claim-reject", args=[own_claim.pk]) in row_of(
        page, f"claim-request-{own_claim.pk}"
    )


def test_it_answers_a_stale_approval_of_ones_own_request_on_the_row(
    own_claim: ClaimRequest, charlie: User
) -> None:
    url = reverse("claim-approve", args=[own_claim.pk])
    response = htmx_client_for(charlie).post(url)
    assert response.status_code == 200  # htmx swaps the row in; it swaps no 403
    row = response.content.decode()
    assert row.lstrip().startswith(f'<tr id="claim-request-{own_claim.pk}"')
    assert "another approver must (four-eyes)" in text_of(row)
    assert OWN in text_of(row) and url not in row
    own_claim.refresh_from_db()
    assert own_claim.state == "pending"


def test_it_refuses_a_stale_approval_without_javascript_with_403_saying_why(
    own_claim: ClaimRequest, charlie: User
) -> None:
    response = client_for(charlie).post(reverse("claim-approve", args=[own_claim.pk]))
    assert response.status_code == 403
    assert "You cannot approve your own request" in response.content.decode()
    own_claim.refresh_from_db()
    assert own_claim.state == "pending"


def test_it_reads_a_page_of_ones_own_requests_in_a_few_queries(
    charlie: User, cluster: Cluster, django_assert_max_num_queries: Any
) -> None:
    ns = services.namespace_request_submit(user=charlie, cluster=cluster, name="charlie-ml")
    for i in range(20):
        services.claim_request_submit(
            user=charlie, namespace_request=ns, name=f"c{i}", device_class=GPU_CLASS
        )
    client = client_for(charlie)
    # The page's ten (test_views_approvals), and who else may approve once, not per row.
    with django_assert_max_num_queries(13):
        page = client.get(reverse("approvals")).content.decode()
    assert text_of(page).count(OWN) == 21
