"""Team quotas: the portal refuses what does not fit and, if the admin chose it, approves
on its own what does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from claims import quota, services
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team
from tests.fixtures.portal import work_sent

GPU = "gpu.nvidia.com"


@pytest.fixture
def cluster(db: None) -> Cluster:
    inventory = {"device_classes": [{"name": GPU, "selectors": []}], "device_counts": {GPU: 8}}
    return Cluster.objects.create(name="lab", inventory=inventory)


@pytest.fixture
def team(alice: User, bob: User) -> Team:
    team = Team.objects.create(name="vision", gpu_quota=4)
    team.members.add(alice, bob)
    return team


def submit(user: User, cluster: Cluster, name: str, **fields: object) -> ClaimRequest:
    ns, _ = NamespaceRequest.objects.get_or_create(
        owner=user, cluster=cluster, name=f"ns-{user.username}"
    )
    values: dict = {"device_class": GPU, "count": 1} | fields
    return services.claim_request_submit(user=user, namespace_request=ns, name=name, **values)


def test_it_counts_what_the_teams_live_claims_ask_for(
    team: Team, alice: User, bob: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "a", count=2)
    submit(bob, cluster, "b", count=1)
    released = submit(bob, cluster, "c", count=1)
    services.claim_request_release(user=bob, claim_request=released)
    assert quota.devices_held(team) == 3


def test_it_refuses_a_claim_beyond_the_quota(
    team: Team, alice: User, bob: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "a", count=3)
    with pytest.raises(ValidationError) as excinfo:
        submit(bob, cluster, "b", count=2)
    assert excinfo.value.message_dict["count"] == [
        "Team vision may ask for 4 device(s) in all; 3 are already asked for, so at most 1 more."
    ]


def test_it_counts_an_all_devices_claim_at_its_class_size(
    team: Team, alice: User, cluster: Cluster
) -> None:
    with pytest.raises(ValidationError):
        submit(alice, cluster, "a", count=None, all_devices=True)  # 8 > 4


def test_it_sets_no_limit_without_a_team(carol: User, cluster: Cluster) -> None:
    assert submit(carol, cluster, "a", count=8).state == "pending"


def test_it_approves_within_the_quota_when_the_admin_chose_so(
    team: Team, alice: User, cluster: Cluster, django_capture_on_commit_callbacks: object
) -> None:
    Team.objects.filter(pk=team.pk).update(auto_approve=True)
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="auto")
    assert ns.state == "approved"
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        claim = services.claim_request_submit(
            user=alice, namespace_request=ns, name="a", device_class=GPU, count=4
        )
    claim.refresh_from_db()
    assert claim.state == "approved"
    assert claim.decided_by is None
    assert "within team vision's quota" in claim.state_message
    assert len(work_sent(callbacks)) == 1  # applying it


def test_it_leaves_other_teams_requests_to_an_approver(alice: User, cluster: Cluster) -> None:
    Team.objects.create(name="nlp", gpu_quota=0, auto_approve=False).members.add(alice)
    assert submit(alice, cluster, "a", count=8).state == "pending"
