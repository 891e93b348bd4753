"""/api/v1/teams/ and /api/v1/approval-rules/: members read their teams (approvers and staff
every team), admins change them through claims.domain.teams, audited, and a quota changed here
reaches the ResourceQuota of the team's live namespaces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from claims.domain.transitions import transition
from claims.models import (
    ApprovalRule,
    AuditEvent,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
    TeamQuota,
)
from claims.worker import cluster_steps
from tests.api.conftest import GPU, namespace_with_claim, token_client
from tests.fixtures.portal import make_user, work_sent

KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
Api = Callable[[str], APIClient]


@pytest.fixture
def admin(db: None) -> User:
    """Staff with the admin's permissions on teams and rules (not a superuser)."""
    user = make_user("dana")
    user.is_staff = True
    user.save()
    models = ["team", "teammembership", "teamquota", "approvalrule"]
    user.user_permissions.set(Permission.objects.filter(content_type__model__in=models))
    return user


@pytest.fixture
def team(alice: User, cluster: Cluster) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=GPU, max_devices=3)
    return team


@pytest.fixture
def other_team(bob: User) -> Team:
    team = Team.objects.create(name="nlp")
    team.members.add(bob)
    return team


@pytest.fixture
def as_admin(admin: User) -> APIClient:
    return token_client(admin)


def names(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def test_it_lists_only_the_teams_a_user_is_in(api: Api, team: Team, other_team: Team) -> None:
    assert names(api("alice").get("/api/v1/teams/")) == ["vision"]
    assert names(api("bob").get("/api/v1/teams/")) == ["nlp"]
    page = api("alice").get("/api/v1/teams/").json()
    assert len(page["results"]) == 1 and page["results"][0]["role"] == "member"


def test_it_lists_every_team_for_approvers_and_staff(
    api: Api, as_admin: APIClient, team: Team, other_team: Team
) -> None:
    assert names(api("carol").get("/api/v1/teams/")) == ["nlp", "vision"]
    assert names(as_admin.get("/api/v1/teams/?ordering=-name")) == ["vision", "nlp"]
    assert api("carol").get("/api/v1/teams/").json()["results"][0]["role"] is None


def test_it_shows_members_quotas_use_and_rules(
    api: Api, alice: User, team: Team, other_team: Team, cluster: Cluster
) -> None:
    namespace_with_claim(alice, cluster, "use")  # one pending GPU: it counts
    mine = ApprovalRule.objects.create(name="small", team=team, max_devices=1)
    ApprovalRule.objects.create(name="everyone", position=200)
    ApprovalRule.objects.create(name="theirs", team=other_team)
    ApprovalRule.objects.create(name="off", team=team, enabled=False)
    body = api("alice").get(f"/api/v1/teams/{team.pk}/").json()
    assert [(m["username"], m["role"]) for m in body["members"]] == [("alice", "member")]
    [line] = body["quotas"]
    assert (line["cluster_name"], line["device_class"]) == ("kubesim", GPU)
    assert (line["max_devices"], line["held"], line["room"]) == (3, 1, 2)
    assert [rule["name"] for rule in body["approval_rules"]] == ["small", "everyone"]
    assert body["approval_rules"][0]["id"] == mine.pk
    assert "with at most 1 device" in body["approval_rules"][0]["description"]


def test_it_answers_404_for_a_team_the_user_is_not_in(
    api: Api, team: Team, bob: User, other_team: Team
) -> None:
    for method in ("get", "patch", "delete"):
        response = getattr(api("bob"), method)(f"/api/v1/teams/{team.pk}/")
        assert response.status_code == 404, method
    quota = team.quotas.get()
    response = api("bob").patch(f"/api/v1/teams/{team.pk}/quotas/{quota.pk}/", {"max_devices": 9})
    assert response.status_code == 404
    assert api("bob").post(f"/api/v1/teams/{team.pk}/members/", {"user": "bob"}).status_code == 404


def test_it_refuses_a_members_or_an_approvers_write(api: Api, team: Team) -> None:
    quota = team.quotas.get()
    for who in ("alice", "carol"):
        client = api(who)
        assert client.patch(f"/api/v1/teams/{team.pk}/", {"name": "x"}).status_code == 403
        url = f"/api/v1/teams/{team.pk}/quotas/{quota.pk}/"
        assert client.patch(url, {"max_devices": 9}).status_code == 403
        assert client.post("/api/v1/teams/", {"name": "mine"}).status_code == 403
        assert client.post("/api/v1/approval-rules/", {"name": "mine"}).status_code == 403
    assert TeamQuota.objects.get().max_devices == 3
    assert not Team.objects.filter(name="mine").exists()


def test_it_refuses_staff_without_the_permission(team: Team) -> None:
    staff = make_user("erin")
    staff.is_staff = True
    staff.save()
    response = token_client(staff).patch(f"/api/v1/teams/{team.pk}/", {"auto_approve": True})
    assert response.status_code == 403


def audit_rows(admin: User) -> list[tuple[str, str, str]]:
    rows = AuditEvent.objects.filter(actor=admin).order_by("id")
    assert all(row.channel == "api" for row in rows)
    return list(rows.values_list("action", "object_kind", "object_name"))


def test_it_lets_an_admin_build_a_team_audited(
    as_admin: APIClient, admin: User, alice: User, cluster: Cluster
) -> None:
    created = as_admin.post("/api/v1/teams/", {"name": "speech"}, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    member = as_admin.post(f"/api/v1/teams/{pk}/members/", {"user": "alice", "role": "approver"})
    assert member.status_code == 201 and member.json()["role"] == "approver"
    data = {
        "cluster": cluster.pk,
        "device_class": GPU,
        "max_devices": 2,
        "max_lifetime_seconds": 3600,
    }
    quota = as_admin.post(f"/api/v1/teams/{pk}/quotas/", data, format="json")
    assert quota.status_code == 201, quota.content
    assert (quota.json()["max_lifetime_seconds"], quota.json()["held"]) == (3600, 0)
    rule = {"name": "speech-small", "team": pk, "max_devices": 1}
    assert as_admin.post("/api/v1/approval-rules/", rule, format="json").status_code == 201
    assert TeamMembership.objects.get(user=alice).role == "approver"
    assert audit_rows(admin) == [
        ("created", "team", "speech"),
        ("created", "team_membership", "alice in speech (team approver)"),
        ("created", "team_quota", f"speech: {GPU} on kubesim (2)"),
        ("created", "approval_rule", "speech-small"),
    ]


def test_it_answers_bad_input_with_field_errors(
    as_admin: APIClient, team: Team, cluster: Cluster
) -> None:
    url = f"/api/v1/teams/{team.pk}/quotas/"
    cases = [
        ({"cluster": cluster.pk, "device_class": "x", "max_devices": -1}, "max_devices"),
        ({"cluster": 999999, "device_class": "x"}, "cluster"),
        ({"cluster": cluster.pk, "device_class": GPU}, "device_class"),  # a second row
        (
            {"cluster": cluster.pk, "device_class": "x", "max_lifetime_seconds": 0},
            "max_lifetime_seconds",
        ),
    ]
    for data, field in cases:
        response = as_admin.post(url, data, format="json")
        assert response.status_code == 400, data
        assert list(response.json()) == [field], response.json()
    members = f"/api/v1/teams/{team.pk}/members/"
    assert list(as_admin.post(members, {"user": "nobody"}).json()) == ["user"]
    assert list(as_admin.post(members, {"user": "alice"}).json()) == ["user"]  # already in
    assert list(as_admin.post("/api/v1/teams/", {"name": "vision"}).json()) == ["name"]
    assert list(as_admin.post("/api/v1/approval-rules/", {"name": "a b"}).json()) == ["name"]
    assert TeamQuota.objects.count() == 1


def test_it_deletes_only_an_empty_team(as_admin: APIClient, admin: User, team: Team) -> None:
    response = as_admin.delete(f"/api/v1/teams/{team.pk}/")
    assert response.status_code == 409
    assert "still has members" in response.json()["detail"]
    member = team.memberships.get()
    url = f"/api/v1/teams/{team.pk}/members/{member.pk}/"
    assert as_admin.delete(url).json()["username"] == "alice"
    assert as_admin.delete(f"/api/v1/teams/{team.pk}/").json()["name"] == "vision"
    assert not Team.objects.exists() and not TeamQuota.objects.exists()
    actions = [row[:2] for row in audit_rows(admin)]
    assert actions == [
        ("deleted", "team_membership"),
        ("deleted", "team_quota"),
        ("deleted", "team"),
    ]


@pytest.fixture
def live_ns(team: Team, alice: User, cluster: Cluster, namespace_name: str) -> NamespaceRequest:
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name=namespace_name)
    transition(ns, to="approved", allowed=("pending",))
    assert cluster_steps.apply_namespace(ns)
    transition(ns, to="active", allowed=("approved",))
    return ns


def test_a_quota_changed_here_reaches_the_namespaces_resource_quota(
    as_admin: APIClient,
    admin: User,
    team: Team,
    live_ns: NamespaceRequest,
    kubesim_cluster: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    quota = team.quotas.get()
    url = f"/api/v1/teams/{team.pk}/quotas/{quota.pk}/"
    with django_capture_on_commit_callbacks() as callbacks:
        response = as_admin.patch(url, {"max_devices": 5}, format="json")
    assert response.status_code == 200 and response.json()["room"] == 5
    assert len(work_sent(callbacks)) == 1  # apply_namespace_quota for the one live namespace
    cluster_steps.apply_namespace_quota(live_ns)
    path = f"/api/v1/namespaces/{live_ns.name}/resourcequotas/gpu-portal-quota"
    assert kubesim_cluster.admin("GET", path)["spec"]["hard"] == {KEY: "5"}
    event = AuditEvent.objects.get(actor=admin, object_kind="team_quota")
    assert (event.action, event.before, event.after) == (
        "changed",
        {"max_devices": 3},
        {"max_devices": 5},
    )


def test_removing_a_member_sends_their_namespaces_new_quotas(
    as_admin: APIClient,
    team: Team,
    live_ns: NamespaceRequest,
    django_capture_on_commit_callbacks: Any,
) -> None:
    member = team.memberships.get()
    with django_capture_on_commit_callbacks() as callbacks:
        assert as_admin.delete(f"/api/v1/teams/{team.pk}/members/{member.pk}/").status_code == 200
    assert len(work_sent(callbacks)) == 1


def test_it_shows_enabled_rules_to_everyone_and_all_to_admins(
    api: Api, as_admin: APIClient, team: Team
) -> None:
    ApprovalRule.objects.create(name="on", position=1)
    off = ApprovalRule.objects.create(name="off", enabled=False, position=2)
    assert names(api("bob").get("/api/v1/approval-rules/")) == ["on"]
    assert names(as_admin.get("/api/v1/approval-rules/")) == ["on", "off"]
    url = f"/api/v1/approval-rules/{off.pk}/"
    assert api("carol").patch(url, {"enabled": True}).status_code == 403
    changed = as_admin.patch(url, {"enabled": True, "max_lifetime_seconds": 86400}, format="json")
    assert changed.json()["max_lifetime_seconds"] == 86400
    assert names(api("bob").get("/api/v1/approval-rules/")) == ["on", "off"]
    assert as_admin.delete(url).json()["name"] == "off"
    assert as_admin.delete(url).status_code == 404


def test_an_admin_sets_the_idle_reclaim_policy_with_field_errors(
    as_admin: APIClient, team: Team
) -> None:
    url = f"/api/v1/teams/{team.pk}/"
    policy = {
        "idle_reclaim": True,
        "idle_threshold": 0.1,
        "idle_window_seconds": 7200,
        "idle_grace_seconds": 1800,
    }
    response = as_admin.patch(url, policy, format="json")
    assert response.status_code == 200, response.content
    assert {name: response.json()[name] for name in policy} == policy
    team.refresh_from_db()
    assert (team.idle_window.total_seconds(), team.idle_grace.total_seconds()) == (7200, 1800)
    for data, field in [
        ({"idle_threshold": 1.5}, "idle_threshold"),
        ({"idle_threshold": -0.1}, "idle_threshold"),
        ({"idle_window_seconds": 0}, "idle_window_seconds"),
        ({"idle_grace_seconds": -1}, "idle_grace_seconds"),
        ({"idle_reclaim": "perhaps"}, "idle_reclaim"),
    ]:
        response = as_admin.patch(url, data, format="json")
        assert response.status_code == 400, data
        assert list(response.json()) == [field], response.json()
    created = as_admin.post("/api/v1/teams/", {"name": "speech", **policy}, format="json")
    assert created.status_code == 201 and created.json()["idle_threshold"] == 0.1


def test_an_admin_names_the_teams_kueue_local_queue(as_admin: APIClient, team: Team) -> None:
    url = f"/api/v1/teams/{team.pk}/"
    response = as_admin.patch(url, {"kueue_local_queue": "vision-queue"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["kueue_local_queue"] == "vision-queue"
    refused = as_admin.patch(url, {"kueue_local_queue": "Vision Queue"}, format="json")
    assert refused.status_code == 400
    assert list(refused.json()) == ["kueue_local_queue"]
