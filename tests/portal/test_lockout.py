"""Guessing: failed logins and API tokens lock the address out, in every process."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext
from knox.models import AuthToken

from portal import lockout
from portal.lockout import client_ip
from tests.fixtures.portal import PASSWORD, ROOT, _test_database_url

LIMIT = settings.AXES_FAILURE_LIMIT
ELSEWHERE = "10.0.0.2"


def log_in(client: Client, path: str, password: str) -> Any:
    return client.post(path, {"username": "alice", "password": password})


def guess(client: Client, path: str, times: int) -> list[int]:
    return [log_in(client, path, f"wrong-{n}").status_code for n in range(times)]


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_it_locks_out_an_address_that_keeps_guessing(alice: User, path: str) -> None:
    alice.is_staff = True  # so the admin login would let her in
    alice.save()
    client = Client()
    assert guess(client, path, LIMIT - 1) == [200] * (LIMIT - 1)
    assert guess(client, path, 1) == [429]
    locked = log_in(client, path, PASSWORD)
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    assert int(locked["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    assert log_in(Client(REMOTE_ADDR=ELSEWHERE), path, PASSWORD).status_code == 302


def test_it_counts_guesses_at_any_username(alice: User) -> None:
    client = Client()
    for n in range(LIMIT):
        client.post("/accounts/login/", {"username": f"user{n}", "password": "x"})
    assert log_in(client, "/accounts/login/", PASSWORD).status_code == 429


def test_it_lets_a_few_typos_through(alice: User) -> None:
    client = Client()
    guess(client, "/accounts/login/", LIMIT - 1)
    assert log_in(client, "/accounts/login/", PASSWORD).status_code == 302


def me(token: str, address: str = "127.0.0.1") -> Any:
    return Client(REMOTE_ADDR=address).get(
        "/api/v1/me/", headers={"authorization": f"Token {token}"}
    )


def test_it_throttles_random_api_tokens_and_then_any_token(alice: User) -> None:
    _, valid = AuthToken.objects.create(alice)
    codes = [me(f"gpup_{secrets.token_hex(32)}").status_code for _ in range(200)]
    assert codes[: LIMIT - 1] == [401] * (LIMIT - 1)
    assert set(codes[LIMIT - 1 :]) == {429}
    locked = me(valid)
    assert locked.status_code == 429 and int(locked["Retry-After"]) > 0
    assert locked.json()["detail"].startswith("Request was throttled")
    assert me(valid, ELSEWHERE).status_code == 200


def test_it_asks_axes_once_a_second_per_address_until_a_failure(alice: User) -> None:
    """The lockout check is a SUM on every API request: "not locked" is kept a second per
    address, and forgotten at the first failure, so a lockout still holds at once."""
    _, valid = AuthToken.objects.create(alice)
    lockout._not_locked_until.clear()
    with CaptureQueriesContext(connection) as queries:
        assert [me(valid).status_code for _ in range(3)] == [200] * 3
    assert sum("axes_accessattempt" in q["sql"] for q in queries.captured_queries) == 1
    codes = [me(f"gpup_{secrets.token_hex(32)}").status_code for _ in range(LIMIT)]
    assert codes[-1] == 429
    assert me(valid).status_code == 429
    assert me(valid, ELSEWHERE).status_code == 200
    guess(Client(REMOTE_ADDR=ELSEWHERE), "/accounts/login/", LIMIT)  # a login's failures too
    assert me(valid, ELSEWHERE).status_code == 429


def test_it_shares_the_count_between_logins_and_tokens(alice: User) -> None:
    _, valid = AuthToken.objects.create(alice)
    guess(Client(), "/accounts/login/", LIMIT)
    assert me(valid).status_code == 429


def test_it_leaves_requests_without_a_token_alone(alice: User) -> None:
    guess(Client(), "/accounts/login/", LIMIT)
    client = Client()
    client.force_login(alice)
    assert client.get("/api/v1/me/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_lockout_holds_in_another_process(alice: User) -> None:
    guess(Client(), "/accounts/login/", LIMIT)
    script = (
        "import django; django.setup(); from django.test import Client; "
        "print(Client().post('/accounts/login/', "
        f"{{'username': 'alice', 'password': {PASSWORD!r}}}).status_code)"
    )
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    other = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert other.stdout.split()[-1] == "429", other.stderr


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [(0, "1.2.3.4", "127.0.0.1"), (1, "1.2.3.4, 10.0.0.9", "10.0.0.9"), (1, None, "127.0.0.1")],
)
def test_it_trusts_only_as_many_forwarded_addresses_as_proxies(
    proxies: int, forwarded: str | None, expected: str
) -> None:
    headers = {"x-forwarded-for": forwarded} if forwarded else {}
    request = RequestFactory().get("/", headers=headers)
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies}):
        assert client_ip(request) == expected
