"""The idle reclaim policy on the Teams page: admins and the team's approvers set it, with
errors next to the fields, the same bounds as the API's (claims.policy.idle_policy)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from claims.models import Team, TeamMembership


@pytest.fixture
def team(alice: User, bob: User) -> Team:
    team = Team.objects.create(name="vision")
    team.members.add(alice)
    TeamMembership.objects.create(team=team, user=bob, role=TeamMembership.Role.APPROVER)
    return team


def browser(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(user: User, team: Team, **fields: str) -> object:
    data = {f"idle-{team.pk}-{name}": value for name, value in fields.items()}
    return browser(user).post(reverse("team-idle-policy", args=[team.pk]), data)


def test_a_team_approver_sets_the_idle_reclaim_policy(team: Team, bob: User) -> None:
    client = browser(bob)
    page = client.get(reverse("teams")).content.decode()
    assert f'id="idle-form-{team.pk}"' in page
    fields = {"idle_reclaim": "on", "idle_threshold": "0.1", "idle_window": "90", "idle_grace": "0"}
    data = {f"idle-{team.pk}-{name}": value for name, value in fields.items()}
    response = client.post(reverse("team-idle-policy", args=[team.pk]), data)
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.idle_reclaim and team.idle_threshold == 0.1
    assert (team.idle_window, team.idle_grace) == (timedelta(minutes=90), timedelta(0))
    page = client.get(reverse("teams")).content.decode()
    assert f'id="idle-policy-{team.pk}"' in page and "Saved the idle reclaim of vision." in page


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"idle_threshold": "1.5"}, "idle_threshold", "Give a GPU activity from 0 to 1"),
        ({"idle_threshold": "-0.1"}, "idle_threshold", "Give a GPU activity from 0 to 1"),
        ({"idle_threshold": "often"}, "idle_threshold", "Enter a number."),
        ({"idle_window": "0"}, "idle_window", "Give a window longer than 0"),
        ({"idle_window": "600000"}, "idle_window", "at most 365 days"),
        ({"idle_grace": "-5"}, "idle_grace", "Give a grace period from 0 to 365 days."),
        ({"idle_grace": ""}, "idle_grace", "This field is required."),
    ],
)
def test_it_puts_the_error_next_to_the_field(
    team: Team, admin_user: User, fields: dict[str, str], field: str, message: str
) -> None:
    given = {"idle_reclaim": "on", "idle_threshold": "0.05", "idle_window": "60"}
    response = post(admin_user, team, **({"idle_grace": "60"} | given | fields))
    assert response.status_code == 400
    page = response.content.decode()
    start = page.index(f'id="field-idle-{team.pk}-{field}"')
    assert message in page[start : page.index("</form>", start)].split('<div class="field')[0]
    assert '<details class="idle-policy-form" open>' in page
    team.refresh_from_db()
    assert not team.idle_reclaim


def test_the_api_refuses_what_the_form_refuses(team: Team, admin_user: User) -> None:
    api = APIClient()
    api.force_authenticate(admin_user)
    url = f"/api/v1/teams/{team.pk}/"
    too_long = {"idle_window_seconds": 365 * 86400 + 1}
    assert list(api.patch(url, too_long, format="json").json()) == ["idle_window_seconds"]
    assert api.patch(url, {"idle_window_seconds": 365 * 86400}, format="json").status_code == 200


def test_members_and_other_approvers_may_not(team: Team, alice: User, carol: User) -> None:
    assert f'id="idle-form-{team.pk}"' not in browser(alice).get(reverse("teams")).content.decode()
    assert post(alice, team, idle_reclaim="on").status_code == 403
    assert post(carol, team, idle_reclaim="on").status_code == 403
    team.refresh_from_db()
    assert not team.idle_reclaim
