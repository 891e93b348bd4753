"""Approval rules admins set, four-eyes, and who may decide which team's requests."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from claims.domain import services
from claims.domain.transitions import transition
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    TeamQuota,
)
from claims.policy import rules
from claims.read import approval_queue, selectors
from tests.fixtures.portal import make_user

GPU = "gpu.nvidia.com"
MIG = "mig.nvidia.com"


@pytest.fixture
def cluster(db: None) -> Cluster:
    classes = [{"name": GPU, "selectors": []}, {"name": MIG, "selectors": []}]
    inventory = {"device_classes": classes, "device_counts": {GPU: 8, MIG: 14}}
    return Cluster.objects.create(name="lab", inventory=inventory)


@pytest.fixture
def team(alice: User, cluster: Cluster) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=GPU, max_devices=4)
    return team


@pytest.fixture
def dave(team: Team) -> User:
    """vision's team approver."""
    dave = make_user("dave")
    TeamMembership.objects.create(team=team, user=dave, role=TeamMembership.Role.APPROVER)
    return dave


@pytest.fixture
def ns(alice: User, cluster: Cluster) -> NamespaceRequest:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="vision")
    transition(ns, to="active", allowed=("pending",))
    return ns


def submit(user: User, ns: NamespaceRequest, name: str, **fields: object) -> ClaimRequest:
    values: dict = {"device_class": GPU, "count": 1} | fields
    claim = services.claim_request_submit(user=user, namespace_request=ns, name=name, **values)
    claim.refresh_from_db()
    return claim


def small_rule(**fields: object) -> ApprovalRule:
    values: dict = {"name": "small-gpu", "device_class": GPU, "max_devices": 2} | fields
    return ApprovalRule.objects.create(**values)


def test_it_approves_automatically_within_a_rule_and_says_which(
    team: Team, alice: User, ns: NamespaceRequest
) -> None:
    small_rule(team=team)
    claim = submit(alice, ns, "small", count=2)
    assert claim.state == "approved"
    assert claim.decided_by is None
    event = AuditEvent.objects.get(object_id=claim.pk, to_state="approved")
    assert event.message == (
        "Approved automatically by rule 'small-gpu' (within team vision's quota)."
    )


def test_it_leaves_to_an_approver_what_no_rule_covers(
    team: Team, alice: User, ns: NamespaceRequest
) -> None:
    small_rule()
    ApprovalRule.objects.create(name="off", enabled=False)
    ApprovalRule.objects.create(name="other-team", team=Team.objects.create(name="nlp"))
    assert submit(alice, ns, "three", count=3).state == "pending"  # more than 2
    assert submit(alice, ns, "mig", device_class=MIG).state == "pending"  # another class


def test_no_rule_approves_beyond_the_quota(team: Team, alice: User, ns: NamespaceRequest) -> None:
    small_rule(max_devices=None)
    submit(alice, ns, "a", count=3)
    with pytest.raises(ValidationError):
        submit(alice, ns, "b", count=2)


def test_no_rule_approves_for_a_user_in_no_team(carol: User, cluster: Cluster) -> None:
    small_rule()
    ns = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name="loner")
    assert submit(carol, ns, "a").state == "pending"


def test_a_namespace_rule_approves_namespace_requests(team: Team, alice: User) -> None:
    ApprovalRule.objects.create(name="team-spaces", applies_to="namespace", team=team)
    cluster = Cluster.objects.get(name="lab")
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="mine")
    assert ns.state == "approved"
    assert ns.state_message == "Approved automatically by rule 'team-spaces'."


def test_four_eyes_an_approver_cannot_approve_their_own_request(
    carol: User, cluster: Cluster
) -> None:
    ns = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name="carols")
    claim = submit(carol, ns, "mine")
    with pytest.raises(PermissionDenied, match="four-eyes"):
        services.claim_request_approve(user=carol, claim_request=claim)
    with pytest.raises(PermissionDenied, match="four-eyes"):
        services.namespace_request_approve(user=carol, namespace_request=ns)
    services.claim_request_reject(user=carol, claim_request=claim, reason="Not needed after all")


def test_four_eyes_counts_a_request_submitted_on_someone_elses_behalf(
    carol: User, ns: NamespaceRequest
) -> None:
    claim = submit(carol, ns, "for-alice")
    assert claim.owner == ns.owner
    with pytest.raises(PermissionDenied, match="four-eyes"):
        services.claim_request_approve(user=carol, claim_request=claim)


def test_a_setting_allows_self_approval(carol: User, cluster: Cluster, settings: object) -> None:
    settings.ALLOW_SELF_APPROVAL = True  # type: ignore[attr-defined]
    ns = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name="carols")
    claim = submit(carol, ns, "mine")
    services.claim_request_approve(user=carol, claim_request=claim)
    assert ClaimRequest.objects.get(pk=claim.pk).state == "approved"


def test_a_team_approver_decides_their_teams_requests_only(
    dave: User, ns: NamespaceRequest, bob: User, cluster: Cluster
) -> None:
    claim = submit(ns.owner, ns, "alices")
    services.claim_request_approve(user=dave, claim_request=claim)
    assert ClaimRequest.objects.get(pk=claim.pk).decided_by == dave
    other = NamespaceRequest.objects.create(owner=bob, cluster=cluster, name="bobs")
    bobs = submit(bob, other, "bobs")
    with pytest.raises(PermissionDenied, match="team approvers only their team's"):
        services.claim_request_approve(user=dave, claim_request=bobs)
    with pytest.raises(PermissionDenied):
        services.claim_request_reject(user=dave, claim_request=bobs, reason="Not ours")


def test_a_staff_approver_decides_every_teams_requests(
    carol: User, ns: NamespaceRequest, dave: User
) -> None:
    claim = submit(ns.owner, ns, "alices")
    services.claim_request_approve(user=carol, claim_request=claim)
    assert ClaimRequest.objects.get(pk=claim.pk).state == "approved"
    assert rules.is_any_approver(dave) and not rules.is_any_approver(ns.owner)


def test_an_extension_rule_extends_within_the_teams_max_lifetime(
    team: Team, ns: NamespaceRequest
) -> None:
    TeamQuota.objects.filter(team=team).update(max_lifetime=timedelta(days=14))
    claim = submit(ns.owner, ns, "long")
    ApprovalRule.objects.create(
        name="a-week-more", applies_to="extension", max_lifetime=timedelta(days=10)
    )
    assert rules.extension_auto_approval(claim, timedelta(days=9)) == (
        "Extended automatically by rule 'a-week-more'."
    )
    assert rules.extension_auto_approval(claim, timedelta(days=12)) is None  # past the rule
    ApprovalRule.objects.filter(name="a-week-more").update(max_lifetime=None)
    assert rules.extension_auto_approval(claim, timedelta(days=15)) is None  # past the team's


def test_the_api_answers_403_to_self_approval_and_400_over_the_quota(
    carol: User, team: Team, ns: NamespaceRequest, cluster: Cluster
) -> None:
    own = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name="carols")
    claim = submit(carol, own, "mine")
    api = APIClient()
    api.force_authenticate(carol)
    response = api.post(reverse("api-claim-approve", args=[claim.pk]))
    assert response.status_code == 403
    assert "four-eyes" in response.json()["detail"]
    body = {"namespace_request": ns.pk, "name": "huge", "device_class": GPU, "count": 5}
    response = api.post(reverse("api-claims"), body, format="json")
    assert response.status_code == 400
    assert "at most 4 more" in str(response.json())


def test_the_claim_form_shows_the_quota_reason_next_to_the_count(
    team: Team, ns: NamespaceRequest
) -> None:
    browser = Client()
    browser.force_login(ns.owner)
    data = {"namespace_request": ns.pk, "name": "huge", "device_class": GPU, "count": 5}
    response = browser.post(reverse("claim-request"), data)
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors["count"] == [
        "Team vision may hold 4 gpu.nvidia.com device(s) on lab; 0 are already held or asked "
        "for, so at most 4 more."
    ]


def test_the_approval_queue_refuses_self_approval_with_403(carol: User, cluster: Cluster) -> None:
    ns = NamespaceRequest.objects.create(owner=carol, cluster=cluster, name="carols")
    claim = submit(carol, ns, "mine")
    browser = Client()
    browser.force_login(carol)
    assert browser.post(reverse("claim-approve", args=[claim.pk])).status_code == 403
    assert ClaimRequest.objects.get(pk=claim.pk).state == "pending"


def test_a_team_approvers_queue_holds_their_teams_requests_only(
    dave: User, carol: User, ns: NamespaceRequest, bob: User, cluster: Cluster
) -> None:
    alices = submit(ns.owner, ns, "alices")
    other = NamespaceRequest.objects.create(owner=bob, cluster=cluster, name="bobs")
    bobs = submit(bob, other, "bobs")
    queue = approval_queue.approval_queue(user=dave)
    assert list(queue["claims"]) == [alices]
    assert list(queue["namespaces"]) == []  # alice's namespace is active already
    assert approval_queue.approval_count(dave) == 1
    assert set(approval_queue.approval_queue(user=carol)["claims"]) == {alices, bobs}
    assert not selectors.user_may_decide(bob)
    assert list(approval_queue.approval_queue(user=bob)["claims"]) == []


def test_a_team_approver_uses_the_queue_page_and_the_api_for_their_team(
    dave: User, ns: NamespaceRequest, bob: User, cluster: Cluster, client: Client
) -> None:
    alices = submit(ns.owner, ns, "alices")
    bobs = submit(bob, NamespaceRequest.objects.create(owner=bob, cluster=cluster, name="b"), "b")
    client.force_login(dave)
    page = client.get("/approvals/")
    assert page.status_code == 200
    assert b"alices" in page.content and b">b<" not in page.content
    assert client.get(f"/claims/{alices.pk}/").status_code == 200  # their team's request
    assert client.get(f"/claims/{bobs.pk}/").status_code == 404  # not theirs to see

    api = APIClient()
    api.force_authenticate(dave)
    assert api.post(f"/api/v1/claims/{alices.pk}/approve/").status_code == 200
    assert ClaimRequest.objects.get(pk=alices.pk).decided_by == dave
    assert api.post(f"/api/v1/claims/{bobs.pk}/approve/").status_code == 404
    assert ClaimRequest.objects.get(pk=bobs.pk).state == "pending"
