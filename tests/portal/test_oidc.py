"""Single sign-on against a real OpenID Connect provider (django-oidc-provider) on loopback.

The portal runs in pytest-django's live server; `requests` plays the browser, following every
redirect of the authorization-code flow between the two servers and filling in the
provider's login form. The portal exchanges the code, checks the ID token against the
provider's JWKS and reads the userinfo endpoint, all over real HTTP.
"""

from __future__ import annotations

import http.server
import json
import re
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import jwt.algorithms
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import LazySettings as SettingsWrapper
from django.contrib.auth.models import Group, User
from django.core.exceptions import SuspiciousOperation
from playwright.sync_api import Browser
from pytest_django.live_server_helper import LiveServer

import kubesim
from claims.domain.access import RBAC_GROUP as RBAC
from claims.domain.access import cluster_username
from claims.kube import names
from claims.models import AuditEvent, Cluster
from claims.read.selectors import user_is_approver
from portal.oidc import SSO_GROUP, PortalOIDCBackend
from tests.fixtures.portal import granted_namespace
from tests.oidc_provider.fixture import Provider, rsa_key_pem, start_provider

PASSWORD = "a long provider password"
USERS = [
    {"username": "dana", "email": "dana@example.com", "groups": ["ml-team"]},
    {"username": "erin", "email": "erin@example.com", "groups": ["gpu-approvers"]},
    {"username": "fay", "email": "fay@example.com", "groups": ["gpu-admins"], "given_name": "Fay"},
]
# Signed in by the provider, and not everyone the portal should let in.
OUTSIDERS = [
    {"username": "gus", "email": "gus@example.com", "groups": ["contractors"]},
    {"username": "hal", "email": "hal@example.com"},
    {
        "username": "ivy",
        "email": "ivy@example.com",
        "groups": ["ml-team"],
        "claims": {"email_verified": False},
    },
]
OTHER_CLIENT = "another-app"
OTHER_REDIRECT = "http://127.0.0.1:9/elsewhere/callback"


def spec(portal_url: str) -> dict[str, Any]:
    return {
        "key_pem": rsa_key_pem(),
        "users": [{**user, "password": PASSWORD} for user in [*USERS, *OUTSIDERS]],
        "clients": [
            {
                "client_id": "gpu-portal",
                "client_secret": secrets.token_urlsafe(24),
                "redirect_uris": [f"{portal_url}/oidc/callback/"],
            },
            {
                "client_id": OTHER_CLIENT,
                "client_secret": secrets.token_urlsafe(24),
                "redirect_uris": [OTHER_REDIRECT],
            },
        ],
    }


@pytest.fixture
def provider(tmp_path: Path, live_server: LiveServer) -> Iterator[Provider]:
    started = start_provider(tmp_path / "provider", spec(live_server.url))
    yield started
    started.stop()


@pytest.fixture
def sso(settings: SettingsWrapper, provider: Provider) -> Provider:
    for name, value in provider.portal_settings("gpu-portal").items():
        setattr(settings, name, value)
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.OIDC_APPROVER_GROUPS = ["gpu-approvers"]
    settings.OIDC_ADMIN_GROUPS = ["gpu-admins"]
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    return provider


def sign_in(portal_url: str, username: str, password: str = PASSWORD) -> requests.Response:
    """The browser's part: start at the portal, sign in at the provider, come back."""
    browser = requests.Session()
    form = browser.get(f"{portal_url}/oidc/authenticate/", timeout=30)
    assert form.status_code == 200 and "Test identity provider" in form.text, form.text
    next_url = parse_qs(urlsplit(form.url).query)["next"][0]
    answer = browser.post(
        form.url,
        data={
            "username": username,
            "password": password,
            "next": next_url,
            "csrfmiddlewaretoken": browser.cookies["provider_csrftoken"],
        },
        timeout=30,
    )
    answer.session = browser  # type: ignore[attr-defined]
    return answer


def test_it_shows_no_sso_button_and_no_sso_endpoints_unless_configured(
    live_server: LiveServer, db: None
) -> None:
    page = requests.get(f"{live_server.url}/accounts/login/", timeout=30)
    assert page.status_code == 200 and "Sign in with" not in page.text
    start = requests.get(f"{live_server.url}/oidc/authenticate/", timeout=30)
    assert start.status_code == 404


def test_it_offers_the_provider_on_the_login_page_beside_the_local_form(
    live_server: LiveServer, sso: Provider
) -> None:
    page = requests.get(f"{live_server.url}/accounts/login/?next=/claims/", timeout=30)
    assert 'name="password"' in page.text  # local accounts stay
    assert "Sign in with Example SSO" in page.text
    assert 'href="/oidc/authenticate/?next=/claims/"' in page.text


def test_it_signs_people_in_through_the_provider_with_the_roles_of_their_groups(
    live_server: LiveServer, sso: Provider
) -> None:
    for person in USERS:
        answer = sign_in(live_server.url, person["username"])
        assert answer.url == f"{live_server.url}/", answer.url
        assert answer.status_code == 200
        assert "sessionid" in answer.session.cookies  # type: ignore[attr-defined]
    dana, erin, fay = (User.objects.get(username=p["username"]) for p in USERS)
    assert (dana.email, dana.has_usable_password()) == ("dana@example.com", False)
    assert not user_is_approver(dana) and not dana.is_staff and not dana.is_superuser
    assert user_is_approver(erin) and not erin.is_staff and not erin.is_superuser
    assert fay.is_staff and fay.is_superuser and user_is_approver(fay)
    assert fay.first_name == "Fay"
    logins = AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN)
    assert sorted(logins.values_list("object_name", flat=True)) == ["dana", "erin", "fay"]


def sso_account(username: str, **fields: Any) -> User:
    """An account single sign-on may sign in, as one it made."""
    user = User.objects.create_user(username, **fields)
    user.groups.add(Group.objects.get_or_create(name=SSO_GROUP)[0])
    return user


def refused_with(answer: requests.Response, portal_url: str, notice: str) -> None:
    assert answer.url == f"{portal_url}/accounts/login/?sso=failed", answer.url
    assert notice in answer.text.replace("&#x27;", "'"), answer.text
    home = answer.session.get(f"{portal_url}/", allow_redirects=False, timeout=30)  # type: ignore[attr-defined]
    assert home.status_code == 302 and home.headers["Location"].startswith("/accounts/login/")


def test_it_takes_the_roles_of_an_sso_account_from_the_provider_at_each_sign_in(
    live_server: LiveServer, sso: Provider
) -> None:
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    User.objects.filter(username="dana").update(is_staff=True, is_superuser=True)
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    dana = User.objects.get(username="dana")
    assert not dana.is_staff and not dana.is_superuser  # ml-team: a data scientist
    assert list(dana.groups.values_list("name", flat=True)) == [SSO_GROUP]


def test_it_refuses_to_take_over_a_local_account_of_the_same_name(
    live_server: LiveServer, sso: Provider
) -> None:
    dana = User.objects.create_user("dana", password="a local password", is_superuser=True)
    answer = sign_in(live_server.url, "dana")
    refused_with(answer, live_server.url, "The account dana here is a local one")
    dana.refresh_from_db()
    assert dana.is_superuser and dana.check_password("a local password")
    assert not dana.groups.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN).exists()


def test_it_links_a_local_account_when_allowed_or_put_in_the_sso_group(
    live_server: LiveServer, sso: Provider, settings: SettingsWrapper
) -> None:
    dana = User.objects.create_user("dana", password="a local password", is_superuser=True)
    erin = User.objects.create_user("erin", password="a local password")
    erin.groups.add(Group.objects.get_or_create(name=SSO_GROUP)[0])  # by an administrator
    assert sign_in(live_server.url, "erin").url == f"{live_server.url}/"
    settings.OIDC_LINK_LOCAL_ACCOUNTS = True
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    settings.OIDC_LINK_LOCAL_ACCOUNTS = False
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"  # linked for good
    dana.refresh_from_db()
    assert not dana.is_superuser  # the provider decides now
    assert User.objects.filter(username="dana").count() == 1
    assert user_is_approver(User.objects.get(username="erin"))


def test_it_never_matches_an_account_by_its_email(
    live_server: LiveServer, sso: Provider, settings: SettingsWrapper
) -> None:
    # mozilla-django-oidc's default would sign dana in as this admin (same address).
    admin = User.objects.create_user("root", email="dana@example.com", is_superuser=True)
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    settings.OIDC_USERNAME_CLAIM = "email"
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    made = User.objects.filter(email="dana@example.com").exclude(pk=admin.pk)
    assert sorted(made.values_list("username", flat=True)) == ["dana", "dana@example.com"]
    assert not made.filter(is_superuser=True).exists()
    assert not admin.groups.exists()


def test_it_lets_in_only_the_allowed_groups_when_they_are_set(
    live_server: LiveServer, sso: Provider, settings: SettingsWrapper
) -> None:
    settings.OIDC_USER_GROUPS = ["ml-team"]
    for person in USERS:  # ml-team, and the approver and admin groups
        assert sign_in(live_server.url, person["username"]).url == f"{live_server.url}/"
    notice = "Your Example SSO account is in no group that may use this portal."
    for outsider in ("gus", "hal"):  # another group; none
        refused_with(sign_in(live_server.url, outsider), live_server.url, notice)
    assert not User.objects.filter(username__in=["gus", "hal"]).exists()
    settings.OIDC_USER_GROUPS = []  # anyone the provider signs in
    assert sign_in(live_server.url, "gus").url == f"{live_server.url}/"
    assert not user_is_approver(User.objects.get(username="gus"))


def test_it_refuses_an_unverified_email_address_as_the_username(
    live_server: LiveServer, sso: Provider, settings: SettingsWrapper
) -> None:
    settings.OIDC_USERNAME_CLAIM = "email"
    answer = sign_in(live_server.url, "ivy")
    refused_with(answer, live_server.url, "Example SSO has not verified your email address")
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"  # verified
    settings.OIDC_USERNAME_CLAIM = "preferred_username"  # the address names nobody
    assert sign_in(live_server.url, "ivy").url == f"{live_server.url}/"
    assert list(User.objects.filter(email="ivy@example.com").values_list("username")) == [("ivy",)]


def test_it_names_the_cluster_identity_after_the_configured_claim(
    live_server: LiveServer, sso: Provider, settings: SettingsWrapper
) -> None:
    settings.OIDC_USERNAME_CLAIM = "email"
    settings.ACCESS_USER_PREFIX = "oidc:"
    answer = sign_in(live_server.url, "erin")
    assert answer.url == f"{live_server.url}/"
    erin = User.objects.get(email="erin@example.com")
    assert erin.username == "erin@example.com"
    assert cluster_username(erin.get_username()) == "oidc:erin@example.com"


def test_it_refuses_a_deactivated_account_and_a_callback_it_did_not_start(
    live_server: LiveServer, sso: Provider
) -> None:
    sso_account("dana", is_active=False)
    answer = sign_in(live_server.url, "dana")
    assert answer.url == f"{live_server.url}/accounts/login/?sso=failed"
    # A callback replayed into another browser: its state was never this browser's.
    callback = f"{live_server.url}/oidc/callback/?code=stolen&state=unknown"
    other = requests.Session()
    other.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=30)
    replayed = other.get(callback, timeout=30)
    assert replayed.url == f"{live_server.url}/accounts/login/?sso=failed"
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN).exists()


def test_it_binds_the_signed_in_identity_in_the_namespaces_it_gets(
    live_server: LiveServer,
    sso: Provider,
    settings: SettingsWrapper,
    cluster: Cluster,
    carol: User,
    kubesim_cluster: kubesim.Handle,
) -> None:
    settings.OIDC_USERNAME_CLAIM = "email"
    settings.ACCESS_USER_PREFIX = "oidc:"
    assert sign_in(live_server.url, "dana").url == f"{live_server.url}/"
    dana = User.objects.get(username="dana@example.com")
    ns = granted_namespace(cluster, dana, carol, f"sso-{secrets.token_hex(3)}")
    name = names.access_role_binding_name(dana.get_username())
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns.name}/rolebindings/{name}"
    subjects = kubesim_cluster.admin("GET", path)["subjects"]
    assert {"kind": "User", "apiGroup": RBAC, "name": "oidc:dana@example.com"} in subjects


def test_it_refuses_a_wrong_password_at_the_provider(
    live_server: LiveServer, sso: Provider
) -> None:
    answer = sign_in(live_server.url, "dana", password="not the password")
    assert answer.url.startswith(sso.url.rsplit("/", 1)[0] + "/accounts/login/")
    assert not User.objects.filter(username="dana").exists()


def test_it_refuses_an_id_token_signed_by_a_key_it_does_not_trust(
    live_server: LiveServer,
    sso: Provider,
    settings: SettingsWrapper,
    tmp_path: Path,
) -> None:
    # A second provider with its own key issues the tokens; the portal trusts the first's keys.
    impostor = start_provider(tmp_path / "impostor", spec(live_server.url))
    try:
        for name, value in impostor.portal_settings("gpu-portal").items():
            setattr(settings, name, value)
        settings.OIDC_OP_JWKS_ENDPOINT = sso.endpoint("jwks")
        answer = sign_in(live_server.url, "fay")
    finally:
        impostor.stop()
    assert answer.url == f"{live_server.url}/accounts/login/?sso=failed"
    assert "Single sign-on did not sign you in" in answer.text
    home = answer.session.get(f"{live_server.url}/", allow_redirects=False, timeout=30)  # type: ignore[attr-defined]
    assert home.status_code == 302 and home.headers["Location"].startswith("/accounts/login/")
    assert not User.objects.filter(username="fay").exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN).exists()


def code_flow_id_token(provider: Provider, client_id: str, nonce: str) -> str:
    """An ID token the provider issued to another application (its own code flow)."""
    browser = requests.Session()
    query = {
        "client_id": client_id,
        "response_type": "code",
        "scope": "openid email profile",
        "redirect_uri": OTHER_REDIRECT,
        "state": "s",
        "nonce": nonce,
    }
    form = browser.get(f"{provider.endpoint('authorize')}?{urlencode(query)}", timeout=30)
    login = browser.post(
        form.url,
        data={
            "username": "dana",
            "password": PASSWORD,
            "next": parse_qs(urlsplit(form.url).query)["next"][0],
            "csrfmiddlewaretoken": browser.cookies["provider_csrftoken"],
        },
        allow_redirects=False,
        timeout=30,
    )
    back = browser.get(
        provider.url.rsplit("/", 1)[0] + login.headers["Location"],
        timeout=30,
        allow_redirects=False,
    )
    code = parse_qs(urlsplit(back.headers["Location"]).query)["code"][0]
    token = requests.post(
        provider.endpoint("token"),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": OTHER_REDIRECT,
            "client_id": client_id,
            "client_secret": provider.clients[client_id],
        },
        timeout=30,
    )
    assert token.status_code == 200, token.text
    return str(token.json()["id_token"])


def test_it_refuses_an_id_token_issued_to_another_application(
    sso: Provider, settings: SettingsWrapper
) -> None:
    id_token = code_flow_id_token(sso, OTHER_CLIENT, nonce="n-1")
    with pytest.raises(SuspiciousOperation, match="not this portal"):
        PortalOIDCBackend().verify_token(id_token, nonce="n-1")
    # The same token passes for the application it was issued to: only the audience differs.
    settings.OIDC_RP_CLIENT_ID = OTHER_CLIENT
    payload = PortalOIDCBackend().verify_token(id_token, nonce="n-1")
    assert payload["aud"] == OTHER_CLIENT and payload["iss"] == sso.url
    assert re.fullmatch(r"\d+", str(payload["exp"]))


def test_it_signs_in_through_the_provider_in_a_real_browser(
    live_server: LiveServer, sso: Provider, browser: Browser
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{live_server.url}/accounts/login/")
        page.get_by_role("link", name="Sign in with Example SSO").click()
        page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/accounts/login/"))
        page.fill("input[name=username]", "erin")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        assert "erin" in page.content()
    finally:
        context.close()
    assert user_is_approver(User.objects.get(username="erin"))


def test_it_signs_in_through_a_provider_whose_keys_carry_no_kid(
    live_server: LiveServer, settings: SettingsWrapper, tmp_path: Path
) -> None:
    provider = start_provider(tmp_path / "no-kid", {**spec(live_server.url), "no_kid": True})
    try:
        for name, value in provider.portal_settings("gpu-portal").items():
            setattr(settings, name, value)
        assert "kid" not in requests.get(provider.endpoint("jwks"), timeout=10).json()["keys"][0]
        answer = sign_in(live_server.url, "dana")
    finally:
        provider.stop()
    assert answer.url == f"{live_server.url}/", answer.url
    assert User.objects.filter(username="dana").exists()


class _KeysServer:
    """A JWKS endpoint on this machine serving the keys it is given, as a provider does."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        body = json.dumps({"keys": keys}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _public_jwk(private: rsa.RSAPrivateKey) -> dict[str, Any]:
    """A public key as a JWKS lists it, with no `kid` (it is optional)."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    return {**jwk, "alg": "RS256", "use": "sig"}


def _backend_with_keys(settings: SettingsWrapper, keys: list[dict[str, Any]]) -> Iterator[Any]:
    server = _KeysServer(keys)
    settings.OIDC_OP_JWKS_ENDPOINT = server.url
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_RP_CLIENT_ID = "portal"  # single sign-on on
    try:
        yield PortalOIDCBackend()
    finally:
        server.stop()


def test_it_tries_each_key_without_a_kid_until_one_verifies(settings: SettingsWrapper) -> None:
    signer, other = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in "ab")
    token = jwt.encode({"sub": "alice"}, signer, algorithm="RS256")
    keys = [_public_jwk(other), _public_jwk(signer)]  # the right one second
    for backend in _backend_with_keys(settings, keys):
        found = backend.retrieve_matching_jwk(token)
        assert found.key.public_numbers() == signer.public_key().public_numbers()


def test_it_names_the_settings_to_check_when_no_key_verifies(
    settings: SettingsWrapper, caplog: pytest.LogCaptureFixture
) -> None:
    signer, other = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in "ab")
    token = jwt.encode({"sub": "alice"}, signer, algorithm="RS256")
    for backend in _backend_with_keys(settings, [_public_jwk(other)]):
        with pytest.raises(SuspiciousOperation):
            backend.retrieve_matching_jwk(token)
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "OIDC_OP_JWKS_ENDPOINT" in said and "OIDC_RP_IDP_SIGN_KEY" in said
