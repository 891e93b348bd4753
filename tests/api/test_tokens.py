"""The personal API token page: make (shown once, kept hashed), expire, revoke."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.fixtures.portal import PASSWORD


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_token(client: Client, expires_in: str = "30") -> str:
    response = client.post("/api/tokens/new/", {"expires_in": expires_in})
    assert response.status_code == 200
    return response.context["new_secret"]


def me_status(secret: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client.get("/api/v1/me/").status_code


def test_it_asks_strangers_to_log_in(db: None) -> None:
    response = Client().get("/api/tokens/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_it_shows_a_new_token_once(alice: User) -> None:
    client = logged_in(alice)
    response = client.post("/api/tokens/new/", {"expires_in": "30"})
    secret = response.context["new_secret"]
    assert secret.startswith("gpup_") and secret in response.content.decode()
    assert me_status(secret) == 200
    assert secret not in client.get("/api/tokens/").content.decode()


def test_it_keeps_only_a_hash(alice: User) -> None:
    secret = make_token(logged_in(alice))
    stored = AuthToken.objects.get(user=alice)
    assert secret not in (stored.digest, stored.token_key)
    assert secret.startswith(stored.token_key)


def test_it_sets_the_chosen_expiry(alice: User) -> None:
    make_token(logged_in(alice), "7")
    make_token(logged_in(alice), "never")
    expiries = sorted(AuthToken.objects.values_list("expiry", flat=True), key=lambda e: e is None)
    assert abs(expiries[0] - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    assert expiries[1] is None


def test_it_refuses_an_expired_token(alice: User) -> None:
    secret = make_token(logged_in(alice), "1")
    AuthToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    assert me_status(secret) == 401


def test_it_marks_expired_tokens_in_the_list(alice: User) -> None:
    client = logged_in(alice)
    make_token(client, "1")
    AuthToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    assert "expired" in client.get("/api/tokens/").content.decode()


def test_it_revokes_a_token(alice: User) -> None:
    client = logged_in(alice)
    secret = make_token(client)
    key = AuthToken.objects.get(user=alice).token_key
    response = client.post("/api/tokens/revoke/", {"token_key": key}, follow=True)
    assert "Token revoked" in response.content.decode()
    assert me_status(secret) == 401


def test_it_does_not_revoke_someone_elses_token(alice: User, bob: User) -> None:
    secret = make_token(logged_in(alice))
    key = AuthToken.objects.get(user=alice).token_key
    response = logged_in(bob).post("/api/tokens/revoke/", {"token_key": key}, follow=True)
    assert "No such token" in response.content.decode()
    assert me_status(secret) == 200


def test_it_lists_the_users_tokens_only(alice: User, bob: User) -> None:
    make_token(logged_in(alice))
    alice_key = AuthToken.objects.get(user=alice).token_key
    assert alice_key in logged_in(alice).get("/api/tokens/").content.decode()
    assert alice_key not in logged_in(bob).get("/api/tokens/").content.decode()


def test_it_says_when_the_expiry_is_not_a_choice(alice: User) -> None:
    response = logged_in(alice).post("/api/tokens/new/", {"expires_in": "forever"})
    assert response.status_code == 400
    assert "forever is not one of the available choices" in response.content.decode()
    assert not AuthToken.objects.exists()


def test_it_needs_csrf_to_make_a_token(alice: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.login(username="alice", password=PASSWORD)
    assert client.post("/api/tokens/new/", {"expires_in": "30"}).status_code == 403
    assert not AuthToken.objects.exists()


@pytest.mark.parametrize("expires_in", ["", "-1", "abc", "30\x00", "9" * 400])
def test_it_answers_a_malformed_expiry_next_to_the_field(alice: User, expires_in: str) -> None:
    response = logged_in(alice).post("/api/tokens/new/", {"expires_in": expires_in})
    assert response.status_code == 400
    assert 'class="errorlist' in response.content.decode()
    assert not AuthToken.objects.exists()


@pytest.mark.parametrize("token_key", ["", "x" * 500, "nul\x00"])
def test_it_answers_a_malformed_revoke_with_a_message(alice: User, token_key: str) -> None:
    make_token(logged_in(alice))
    client = logged_in(alice)
    response = client.post("/api/tokens/revoke/", {"token_key": token_key}, follow=True)
    assert response.status_code == 200
    assert "No such token of yours" in response.content.decode()
    assert AuthToken.objects.count() == 1
