"""Team quotas per cluster and device class: the portal refuses what does not fit, at submit
and again at approval, with the reason next to the field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from claims.domain import services
from claims.domain.transitions import TaskToSend, transition
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamMembership, TeamQuota
from claims.policy import quota
from tests.fixtures.portal import work_sent

GPU = "gpu.nvidia.com"
MIG = "mig.nvidia.com"


def make_cluster(name: str, gpus: int = 8) -> Cluster:
    classes = [{"name": GPU, "selectors": []}, {"name": MIG, "selectors": []}]
    inventory = {"device_classes": classes, "device_counts": {GPU: gpus, MIG: 14}}
    return Cluster.objects.create(name=name, inventory=inventory)


@pytest.fixture
def cluster(db: None) -> Cluster:
    return make_cluster("lab")


@pytest.fixture
def team(alice: User, bob: User, cluster: Cluster) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice, bob)
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=GPU, max_devices=4)
    return team


def namespace_of(user: User, cluster: Cluster) -> NamespaceRequest:
    ns, _ = NamespaceRequest.objects.get_or_create(
        owner=user, cluster=cluster, name=f"ns-{user.username}"
    )
    return ns


def submit(user: User, cluster: Cluster, name: str, **fields: object) -> ClaimRequest:
    values: dict = {"device_class": GPU, "count": 1} | fields
    ns = namespace_of(user, cluster)
    return services.claim_request_submit(user=user, namespace_request=ns, name=name, **values)


def test_it_counts_the_teams_live_claims_of_one_class_on_one_cluster(
    team: Team, alice: User, bob: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "a", count=2)
    submit(bob, cluster, "b", count=1)
    submit(bob, cluster, "mig", device_class=MIG, count=5)
    submit(alice, make_cluster("elsewhere"), "far", count=3)
    released = submit(bob, cluster, "c", count=1)
    services.claim_request_release(user=bob, claim_request=released)
    assert quota.devices_held(team, cluster, GPU) == 3
    assert quota.devices_held(team, cluster, MIG) == 5


def test_it_refuses_a_claim_beyond_the_quota_with_the_reason(
    team: Team, alice: User, bob: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "a", count=3)
    with pytest.raises(ValidationError) as refused:
        submit(bob, cluster, "b", count=2)
    assert refused.value.message_dict["count"] == [
        "Team vision may hold 4 gpu.nvidia.com device(s) on lab; 3 are already held or asked "
        "for, so at most 1 more."
    ]
    assert not ClaimRequest.objects.filter(name="b").exists()


def test_it_limits_only_the_class_and_cluster_the_quota_names(
    team: Team, alice: User, cluster: Cluster
) -> None:
    assert submit(alice, cluster, "mig", device_class=MIG, count=14).state == "pending"
    assert submit(alice, make_cluster("big"), "far", count=8).state == "pending"


def test_it_counts_an_all_devices_claim_at_its_class_size(
    team: Team, alice: User, cluster: Cluster
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit(alice, cluster, "a", count=None, all_devices=True)  # 8 > 4
    assert "at most 4 more" in refused.value.message_dict["count"][0]


def test_it_refuses_an_all_devices_claim_the_clusters_quota_would_refuse(
    team: Team, alice: User, cluster: Cluster
) -> None:
    TeamQuota.objects.filter(team=team).update(max_devices=10)
    with pytest.raises(ValidationError) as refused:
        submit(alice, cluster, "a", count=None, all_devices=True)  # 8 of 10, charged 32
    assert refused.value.message_dict["count"] == [
        "The cluster's quota on namespace ns-alice counts an 'all devices' claim as 32 "
        "gpu.nvidia.com devices, over team vision's 10: ask for an exact number of devices."
    ]


def test_it_sets_no_limit_without_a_team(carol: User, cluster: Cluster) -> None:
    assert submit(carol, cluster, "a", count=8).state == "pending"
    assert quota.namespace_quota_hard(quota.team_of(carol), cluster) == {}


def test_it_charges_a_user_in_two_teams_to_the_one_they_joined_first(
    team: Team, alice: User, cluster: Cluster
) -> None:
    later = Team.objects.create(name="nlp")
    TeamMembership.objects.create(team=later, user=alice)
    TeamQuota.objects.create(team=later, cluster=cluster, device_class=GPU, max_devices=1)
    assert quota.team_of(alice) == team
    submit(alice, cluster, "a", count=3)
    assert quota.devices_held(team, cluster, GPU) == 3
    assert quota.devices_held(later, cluster, GPU) == 0


def test_it_gives_the_lifetimes_of_a_class_on_a_cluster(team: Team, cluster: Cluster) -> None:
    TeamQuota.objects.filter(team=team).update(
        max_lifetime=timedelta(days=7), default_lifetime=timedelta(days=10)
    )
    assert quota.max_lifetime(team, cluster, GPU) == timedelta(days=7)
    assert quota.default_lifetime(team, cluster, GPU) == timedelta(days=7)  # capped
    assert quota.max_lifetime(team, cluster, MIG) is None
    assert quota.max_lifetime(None, cluster, GPU) is None


def test_it_puts_the_limited_classes_in_the_namespaces_quota(team: Team, cluster: Cluster) -> None:
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=MIG, max_devices=None)
    assert quota.namespace_quota_hard(team, cluster) == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"
    }


def test_it_approves_within_the_quota_when_the_team_chose_so(
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
    assert claim.state_message == (
        "Approved automatically by team vision's auto-approval (within its quota)."
    )
    enqueued = [c.name for c in work_sent(callbacks) if isinstance(c, TaskToSend)]
    assert enqueued == ["claims.worker.tasks.apply_claim"]  # applying it


def test_approval_refuses_what_the_admin_lowered_the_quota_below(
    team: Team, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = submit(alice, cluster, "big", count=3)
    TeamQuota.objects.filter(team=team).update(max_devices=2)
    with pytest.raises(ValidationError) as refused:
        services.claim_request_approve(user=carol, claim_request=claim)
    assert "Over the quota now: Team vision may hold 2" in str(refused.value)
    assert ClaimRequest.objects.get(pk=claim.pk).state == "pending"


def test_approval_refuses_when_claims_decided_since_used_the_quota_up(
    team: Team, alice: User, carol: User, cluster: Cluster
) -> None:
    """dave joins the team with claims already approved: alice's pending one no longer fits."""
    pending = submit(alice, cluster, "mine", count=3)
    dave = User.objects.create_user("dave")
    held = submit(dave, cluster, "held", count=2)
    services.claim_request_approve(user=carol, claim_request=held)
    team.members.add(dave)
    with pytest.raises(ValidationError) as refused:
        services.claim_request_approve(user=carol, claim_request=pending)
    assert refused.value.messages == [
        "Over the quota now: Team vision may hold 4 gpu.nvidia.com device(s) on lab; 2 are "
        "already held or asked for, so at most 2 more."
    ]
    transition(held, to="released", allowed=("approved",))
    services.claim_request_approve(user=carol, claim_request=pending)
    assert ClaimRequest.objects.get(pk=pending.pk).state == "approved"


def team_use_html(claim: ClaimRequest) -> str:
    template = Template("{% load teams %}{% team_use claim %}")
    return " ".join(template.render(Context({"claim": claim})).split())


def test_the_approval_screen_shows_the_teams_use_before_and_after(
    team: Team, alice: User, bob: User, carol: User, cluster: Cluster
) -> None:
    held = submit(bob, cluster, "held", count=1)
    services.claim_request_approve(user=carol, claim_request=held)
    pending = submit(alice, cluster, "asked", count=2)
    assert (
        "Team vision, gpu.nvidia.com on lab: <strong>1</strong> of 4 held now, "
        "<strong>3</strong> of 4 after approving."
    ) in team_use_html(pending)
    TeamQuota.objects.filter(team=team).update(max_devices=2)
    pending = ClaimRequest.objects.get(pk=pending.pk)  # the next page's
    assert "of 2 after approving (over the quota)." in team_use_html(pending)
    held.refresh_from_db()
    assert team_use_html(held) == ""  # decided


def test_the_teams_use_line_escapes_names_and_is_translated(
    team: Team, alice: User, cluster: Cluster
) -> None:
    Team.objects.filter(pk=team.pk).update(name="<b>vision</b>")
    pending = submit(alice, cluster, "asked", count=1)
    assert "Team &lt;b&gt;vision&lt;/b&gt;, gpu.nvidia.com on lab:" in team_use_html(pending)
    with translation.override("he"):
        hebrew = team_use_html(ClaimRequest.objects.get(pk=pending.pk))
    assert "צוות &lt;b&gt;vision&lt;/b&gt;, gpu.nvidia.com באשכול lab:" in hebrew
    assert "<strong>0</strong> מתוך 4 מוחזקים כעת" in hebrew


def test_the_approval_screen_shows_nothing_for_a_user_in_no_team(
    carol: User, cluster: Cluster
) -> None:
    assert team_use_html(submit(carol, cluster, "solo")) == ""


def test_a_retry_of_a_failed_claim_must_fit_the_quota_as_it_is_now(
    team: Team, alice: User, bob: User, carol: User, cluster: Cluster
) -> None:
    failed = submit(alice, cluster, "failed", count=3)
    services.claim_request_approve(user=carol, claim_request=failed)
    transition(failed, to="failed", allowed=("approved",), message="The cluster said no.")
    taken = submit(bob, cluster, "taken", count=2)  # the failed claim's devices were free
    services.claim_request_approve(user=carol, claim_request=taken)
    with pytest.raises(ValidationError) as refused:
        services.claim_request_retry(user=alice, claim_request=failed)
    assert "Over the quota now: Team vision may hold 4" in str(refused.value)
    assert ClaimRequest.objects.get(pk=failed.pk).state == "failed"


def queries_for_a_page(claims: list[ClaimRequest]) -> int:
    page = list(
        ClaimRequest.objects.filter(pk__in=[claim.pk for claim in claims]).select_related(
            "namespace_request__cluster"
        )
    )
    with CaptureQueriesContext(connection) as captured:
        quota.with_team_use(page)
    return len(captured)


def test_a_page_of_the_queue_reads_the_teams_use_in_a_few_queries(
    team: Team, alice: User, bob: User, carol: User, cluster: Cluster
) -> None:
    TeamQuota.objects.filter(team=team).update(max_devices=40)
    held = submit(bob, cluster, "held", count=None, all_devices=True)
    services.claim_request_approve(user=carol, claim_request=held)
    claims = [submit(alice, cluster, f"c{i}", count=1) for i in range(3)]
    claims.append(submit(carol, cluster, "outsider", count=1))
    few = queries_for_a_page(claims)
    claims += [submit(alice, cluster, f"more{i}", count=1) for i in range(12)]
    assert queries_for_a_page(claims) == few <= 5
    page = quota.with_team_use(list(ClaimRequest.objects.filter(state="pending")))
    for claim in page:
        team_of_owner = quota.team_of(claim.owner)
        expected = quota.approval_use(team_of_owner, claim) if team_of_owner else None
        assert claim.team_use == expected, claim.name  # type: ignore[attr-defined]


def test_it_charges_a_claim_with_alternatives_its_largest_per_class(
    team: Team, alice: User, bob: User, cluster: Cluster
) -> None:
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=MIG, max_devices=6)
    alternatives = [
        {"device_class": GPU, "count": 3},
        {"device_class": MIG, "count": 2},
        {"device_class": MIG, "count": 5},
    ]
    submit(alice, cluster, "either", count=1, alternatives=alternatives)

    # As the API server's quota evaluator charges firstAvailable: the worst case per class.
    assert quota.devices_held(team, cluster, GPU) == 3
    assert quota.devices_held(team, cluster, MIG) == 5
    with pytest.raises(ValidationError) as refused:
        submit(bob, cluster, "more", count=2)
    assert "3 are already held or asked for, so at most 1 more" in str(refused.value)
    with pytest.raises(ValidationError):
        submit(bob, cluster, "slices", device_class=MIG, count=2)
    assert submit(bob, cluster, "one", count=1).state == "pending"


def test_it_refuses_an_alternative_over_the_quota_though_the_first_fits(
    team: Team, alice: User, cluster: Cluster
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit(alice, cluster, "big", count=1, alternatives=[{"device_class": GPU, "count": 6}])
    assert "may hold 4 gpu.nvidia.com device(s)" in refused.value.message_dict["count"][0]
    assert not ClaimRequest.objects.exists()
