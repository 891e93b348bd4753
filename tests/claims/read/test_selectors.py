"""Read queries: each user sees their own requests; approvers see everything."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import Http404
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from claims.domain import transitions
from claims.models import (
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    RunLog,
    Team,
    TeamMembership,
    VerificationRun,
)
from claims.read import approval_queue, selectors


@pytest.fixture
def alices_claim(alice: User, db: None) -> ClaimRequest:
    cluster = Cluster.objects.create(name="lab", preferred_resource_version="v1beta1")
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="team-a")
    return ClaimRequest.objects.create(
        owner=alice, namespace_request=ns, name="train", device_class="gpu.nvidia.com", count=1
    )


def test_it_shows_users_only_their_own(alices_claim: ClaimRequest, bob: User) -> None:
    assert list(selectors.claim_request_list(user=alices_claim.owner)) == [alices_claim]
    assert list(selectors.claim_request_list(user=bob)) == []
    assert list(selectors.namespace_request_list(user=bob)) == []
    with pytest.raises(Http404):
        selectors.claim_request_get(user=bob, pk=alices_claim.pk)


def test_it_shows_approvers_everything(alices_claim: ClaimRequest, carol: User) -> None:
    assert selectors.claim_request_get(user=carol, pk=alices_claim.pk) == alices_claim
    queue = approval_queue.approval_queue(user=carol)
    assert list(queue["claims"]) == [alices_claim]
    assert list(queue["namespaces"]) == [alices_claim.namespace_request]


def test_it_reads_ones_own_object_without_asking_who_approves(
    alices_claim: ClaimRequest, bob: User, carol: User
) -> None:
    """Every long-poll and log read of a script is of its own object: one query, not three
    (approver group, approving teams, then the object)."""
    alice = User.objects.get(pk=alices_claim.owner_id)  # fresh: nothing cached on it
    with CaptureQueriesContext(connection) as queries:
        assert selectors.claim_request_get(user=alice, pk=alices_claim.pk) == alices_claim
    assert len(queries) == 1, [q["sql"] for q in queries.captured_queries]
    # Another's object is still seen only by approvers: staff ones and the owner's team's.
    team, dave = Team.objects.create(name="vision"), User.objects.create_user("dave")
    TeamMembership.objects.create(team=team, user=alice)
    TeamMembership.objects.create(team=team, user=dave, role=TeamMembership.Role.APPROVER)
    ns = alices_claim.namespace_request
    for user in (carol, dave):
        assert selectors.claim_request_get(user=user, pk=alices_claim.pk) == alices_claim
        assert selectors.namespace_request_get(user=user, pk=ns.pk) == ns
    with pytest.raises(Http404):
        selectors.claim_request_get(user=bob, pk=alices_claim.pk)
    run = VerificationRun.objects.create(claim=alices_claim, owner=alice)
    with pytest.raises(Http404):  # a team approver decides claims; runs are the owner's
        selectors.verification_run_log_get(user=dave, pk=run.pk, container="ctr0")
    assert selectors.verification_run_log_get(user=carol, pk=run.pk, container="ctr0")[0] == run


def test_it_gives_non_approvers_an_empty_queue(alices_claim: ClaimRequest) -> None:
    queue = approval_queue.approval_queue(user=alices_claim.owner)
    assert not queue["claims"].exists() and not queue["namespaces"].exists()


def test_it_treats_a_bad_id_as_not_found(alice: User) -> None:
    with pytest.raises(Http404):
        selectors.verification_run_get(user=alice, pk="abc")  # type: ignore[arg-type]


def test_it_scopes_runs_to_their_owner(alices_claim: ClaimRequest, bob: User) -> None:
    run = VerificationRun.objects.create(claim=alices_claim, owner=alices_claim.owner)
    assert selectors.verification_run_get(user=alices_claim.owner, pk=run.pk) == run
    with pytest.raises(Http404):
        selectors.verification_run_get(user=bob, pk=run.pk)


def test_it_counts_the_requests_waiting_for_an_approver(
    alices_claim: ClaimRequest, carol: User
) -> None:
    assert approval_queue.approval_count(carol) == 2
    NamespaceRequest.objects.filter(pk=alices_claim.namespace_request_id).update(state="active")
    assert approval_queue.approval_count(carol) == 1


def test_it_counts_nothing_for_someone_who_does_not_approve(alices_claim: ClaimRequest) -> None:
    assert approval_queue.approval_count(alices_claim.owner) == 0


def test_it_keeps_the_dashboard_fingerprint_while_nothing_changes(
    alices_claim: ClaimRequest,
) -> None:
    alice = alices_claim.owner
    assert selectors.dashboard_fingerprint(user=alice) == selectors.dashboard_fingerprint(
        user=alice
    )


def test_it_changes_the_dashboard_fingerprint_on_a_new_run(alices_claim: ClaimRequest) -> None:
    before = selectors.dashboard_fingerprint(user=alices_claim.owner)
    VerificationRun.objects.create(claim=alices_claim, owner=alices_claim.owner)
    assert selectors.dashboard_fingerprint(user=alices_claim.owner) != before


def test_it_changes_the_dashboard_fingerprint_on_a_change(alices_claim: ClaimRequest) -> None:
    before = selectors.dashboard_fingerprint(user=alices_claim.owner)
    transitions.update_fields(alices_claim, node="gpu-node-1")
    assert selectors.dashboard_fingerprint(user=alices_claim.owner) != before


def test_it_ignores_other_users_work_in_the_fingerprint(
    alices_claim: ClaimRequest, bob: User
) -> None:
    before = selectors.dashboard_fingerprint(user=bob)
    VerificationRun.objects.create(claim=alices_claim, owner=alices_claim.owner)
    assert selectors.dashboard_fingerprint(user=bob) == before


def _add_decided_work(owner: User, approver: User, suffix: str) -> None:
    """A decided namespace and claim, a run with a log, an audit event: one of each row kind."""
    cluster, _ = Cluster.objects.get_or_create(name="lab")
    ns = NamespaceRequest.objects.create(
        owner=owner, cluster=cluster, name=f"team-{suffix}", decided_by=approver
    )
    claim = ClaimRequest.objects.create(
        owner=owner, namespace_request=ns, name="train", device_class="gpu", decided_by=approver
    )
    run = VerificationRun.objects.create(claim=claim, owner=owner)
    RunLog.objects.create(run=run, container=VerificationRun.CONTAINERS[0], text="ok")
    AuditEvent.objects.create(
        actor=approver, owner=owner, object_kind="claim_request", object_id=claim.pk, to_state="x"
    )


def _queries_for(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries.captured_queries)


LISTS = [
    "dashboard",
    "approvals",
    "api-namespace-requests",
    "api-claims",
    "api-runs",
    "api-events",
]


@pytest.mark.parametrize("url_name", LISTS)
def test_it_lists_many_rows_in_as_many_queries_as_one(
    alice: User, carol: User, url_name: str
) -> None:
    url = reverse(url_name)
    _add_decided_work(alice, carol, "1")
    one_row = _queries_for(_client_of(carol, api=url_name.startswith("api-")), url)
    for suffix in "234":
        _add_decided_work(alice, carol, suffix)
    assert _queries_for(_client_of(carol, api=url_name.startswith("api-")), url) == one_row


def _client_of(user: User, *, api: bool) -> Client | APIClient:
    """A client for a fresh copy of the user, as each request loads it (the approver check is
    remembered on the user object)."""
    fresh = User.objects.get(pk=user.pk)
    if api:
        client = APIClient()
        client.force_authenticate(fresh)
        return client
    web = Client()
    web.force_login(fresh)
    return web
