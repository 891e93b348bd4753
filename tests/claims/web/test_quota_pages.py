"""The teams page: a team's members, quotas and what it holds now, and the approval rules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from claims.domain import services
from claims.domain.transitions import TaskToSend, transition
from claims.models import ApprovalRule, Cluster, NamespaceRequest, Team, TeamMembership, TeamQuota
from claims.models.teams import lifetime_words

GPU = "gpu.nvidia.com"


@pytest.fixture
def cluster(db: None) -> Cluster:
    inventory = {"device_classes": [{"name": GPU, "selectors": []}], "device_counts": {GPU: 8}}
    return Cluster.objects.create(name="lab", inventory=inventory)


@pytest.fixture
def team(alice: User, bob: User, cluster: Cluster) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    TeamMembership.objects.create(team=team, user=bob, role=TeamMembership.Role.APPROVER)
    TeamQuota.objects.create(
        team=team, cluster=cluster, device_class=GPU, max_devices=4, max_lifetime=timedelta(days=7)
    )
    return team


def page_of(user: User) -> str:
    browser = Client()
    browser.force_login(user)
    response = browser.get(reverse("teams"))
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def test_it_shows_a_member_their_teams_quotas_and_use(
    team: Team, alice: User, cluster: Cluster
) -> None:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="vision")
    services.claim_request_submit(
        user=alice, namespace_request=ns, name="a", device_class=GPU, count=3
    )
    Team.objects.create(name="secret-team")
    content = page_of(alice)
    assert "<h2>vision</h2>" in content
    assert 'bob <span class="badge info">team approver</span>' in content
    quota = TeamQuota.objects.get()
    assert (
        f'<tr id="quota-{quota.pk}"> <td>lab</td> <td><code>gpu.nvidia.com</code></td> '
        "<td>3</td> <td>4</td> <td>7 days</td> <td>—</td> </tr>"
    ) in content
    assert "secret-team" not in content


def test_it_shows_staff_approvers_every_team_and_the_rules(
    team: Team, carol: User, cluster: Cluster
) -> None:
    Team.objects.create(name="nlp")
    ApprovalRule.objects.create(name="small-gpu", team=team, device_class=GPU, max_devices=2)
    ApprovalRule.objects.create(name="off", enabled=False)
    content = page_of(carol)
    assert "<h2>nlp</h2>" in content and "<h2>vision</h2>" in content
    assert (
        "<td><code>small-gpu</code></td><td>claim requests of team vision of class "
        "gpu.nvidia.com with at most 2 devices</td>"
    ) in content
    assert "<code>off</code>" not in content
    assert "Nobody approves a request they own or submitted (four-eyes)." in content


def test_it_tells_a_user_in_no_team_so(carol: User, db: None) -> None:
    outsider = User.objects.create_user("erin")
    assert "You are in no team." in page_of(outsider)
    assert "No rule: an approver decides every request." in page_of(outsider)


def test_it_says_lifetimes_in_words() -> None:
    assert lifetime_words(timedelta(days=1, hours=12)) == "1 day 12 hours"
    assert lifetime_words(timedelta(minutes=90)) == "1 hour 30 minutes"
    assert lifetime_words(None) == ""


def task_names(callbacks: list[Any]) -> list[str]:
    """The tasks the on-commit callbacks of claims.domain.transitions.enqueue would send."""
    return [callback.name for callback in callbacks if isinstance(callback, TaskToSend)]


def test_an_admins_quota_change_goes_to_the_teams_active_namespaces(
    team: Team, alice: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="vision")
    transition(ns, to="active", allowed=("pending",))
    admin = User.objects.create_superuser("root", "root@example.org", "x")
    browser = Client()
    browser.force_login(admin)
    memberships = list(TeamMembership.objects.filter(team=team).order_by("pk"))
    quota = TeamQuota.objects.get()
    data = {
        "name": "vision",
        # The idle reclaim policy as the admin's form shows it (its defaults).
        "idle_threshold": "0.05",
        "idle_window": "04:00:00",
        "idle_grace": "1 00:00:00",
        "memberships-TOTAL_FORMS": str(len(memberships)),
        "memberships-INITIAL_FORMS": str(len(memberships)),
        "quotas-TOTAL_FORMS": "1",
        "quotas-INITIAL_FORMS": "1",
        "quotas-0-id": str(quota.pk),
        "quotas-0-team": str(team.pk),
        "quotas-0-cluster": str(cluster.pk),
        "quotas-0-device_class": GPU,
        "quotas-0-max_devices": "6",
        "quotas-0-max_lifetime": "7 00:00:00",
    }
    for index, membership in enumerate(memberships):
        prefix = f"memberships-{index}-"
        data |= {
            f"{prefix}id": str(membership.pk),
            f"{prefix}team": str(team.pk),
            f"{prefix}user": str(membership.user_id),
            f"{prefix}role": membership.role,
        }
    url = reverse("admin:claims_team_change", args=[team.pk])
    with django_capture_on_commit_callbacks() as callbacks:
        response = browser.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert TeamQuota.objects.get().max_devices == 6
    refused = browser.post(url, data | {"idle_reclaim": "on", "idle_threshold": "1.5"})
    assert refused.status_code == 200  # the form again, the error next to the field
    assert refused.context["adminform"].form.errors["idle_threshold"] == [
        "Ensure this value is less than or equal to 1.0."
    ]
    assert task_names(callbacks).count("claims.worker.tasks.apply_namespace_quota") == 1
