"""English and Hebrew: who gets which language, right to left for Hebrew, translated pages,
API errors and emails, and a catalog that has every string the portal says."""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import translation
from knox.models import AuthToken
from rest_framework.test import APIClient

from claims.domain import expiry, services
from claims.models import Cluster, Profile
from claims.notify import notifications
from claims.policy import rules
from tests.fixtures.portal import PASSWORD

ROOT = Path(__file__).resolve().parents[3]
CATALOG = ROOT / "locale" / "he" / "LC_MESSAGES"
# What makemessages reads: the portal's code and templates, nothing of the tests or tools.
SOURCES = ["claims", "dracel", "portal", "templates", "locale", "manage.py"]
RTL = '<html lang="he" dir="rtl">'
# What a template may say untranslated: program output (<code>, <pre>, <samp>), and these.
LATIN_WORDS = frozenset(
    """GPU GPUs CUDA MIG API REST DRA CEL YAML JSON CSV UTC MiB sha256 PASS FAIL Kubernetes
    kubectl kubesim kubeconfig Kubeconfig resource k8s io gpu nvidia com Pod Namespace namespace
    ResourceClaim ResourceSlices DeviceClass ServiceAccount RoleBinding ClusterRole Token
    Authorization vectorAdd deviceQuery driver pool Kueue""".split()  # noqa: SIM905
)
TRANSLATED = re.compile(r"\{% *blocktranslate.*?\{% *endblocktranslate *%\}", re.S)
PROGRAM_TEXT = re.compile(r"<(code|pre|samp|script|style|datalist)\b.*?</\1>", re.S)
SAID_IN_ATTRIBUTES = re.compile(r'(?:placeholder|aria-label|title|alt)="([^"]*)"')
MARKUP = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|<[^>]*>|&[a-z]+;|&#\d+;", re.S)


@pytest.fixture(autouse=True)
def back_to_english() -> Iterator[None]:
    """A request activates its language in this thread and leaves it active (as Django does):
    the tests after these must not go on in Hebrew."""
    yield
    translation.deactivate()


def signed_in(user: User, accept_language: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=accept_language)
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def choose(client: Client, code: str) -> Any:
    return client.post(reverse("set-language"), {"language": code, "next": reverse("dashboard")})


@pytest.mark.django_db
def test_it_follows_the_browser_when_nobody_chose(alice: User) -> None:
    hebrew = Client(HTTP_ACCEPT_LANGUAGE="he-IL,he;q=0.9,en;q=0.5").get(reverse("login"))
    english = Client(HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9").get(reverse("login"))
    assert RTL in hebrew.text
    assert '<html lang="en" dir="ltr">' in english.text
    assert signed_in(alice, "he").get(reverse("dashboard")).text.count(RTL) == 1


@pytest.mark.django_db
def test_it_saves_the_choice_to_the_profile_and_applies_it_on_the_next_login(
    alice: User,
) -> None:
    client = signed_in(alice)
    response = choose(client, "he")
    assert response.status_code == 302 and response["Location"] == reverse("dashboard")
    assert Profile.objects.get(user=alice).language == "he"
    assert RTL in client.get(reverse("dashboard")).text
    # Another browser that asks for English: the saved choice wins once she signs in.
    elsewhere = Client(HTTP_ACCEPT_LANGUAGE="en")
    assert '<html lang="en"' in elsewhere.get(reverse("login")).text
    assert elsewhere.login(username="alice", password=PASSWORD)
    assert RTL in elsewhere.get(reverse("dashboard")).text


@pytest.mark.django_db
def test_it_lets_a_visitor_choose_before_signing_in(alice: User) -> None:
    visitor = Client(HTTP_ACCEPT_LANGUAGE="en")
    response = visitor.post(reverse("set-language"), {"language": "he", "next": reverse("login")})
    assert response["Location"] == reverse("login")
    assert RTL in visitor.get(reverse("login")).text
    # Only a signed-in choice is saved to a profile.
    assert not Profile.objects.exists()


@pytest.mark.django_db
def test_it_switches_back_to_english(alice: User) -> None:
    Profile.objects.create(user=alice, language="he")
    client = signed_in(alice, "he")
    choose(client, "en")
    assert Profile.objects.get(user=alice).language == "en"
    assert '<html lang="en" dir="ltr">' in client.get(reverse("dashboard")).text


@pytest.mark.django_db
def test_it_keeps_a_choice_it_does_not_speak_out_of_the_profile(alice: User) -> None:
    client = signed_in(alice)
    choose(client, "fr")
    assert not Profile.objects.filter(user=alice).exclude(language="").exists()
    assert '<html lang="en"' in client.get(reverse("dashboard")).text


@pytest.mark.django_db
def test_it_refuses_to_switch_on_a_get(alice: User) -> None:
    assert signed_in(alice).get(reverse("set-language") + "?language=he").status_code == 405


@pytest.mark.django_db
def test_it_shows_a_field_error_in_hebrew(alice: User, cluster: Cluster) -> None:
    Profile.objects.create(user=alice, language="he")
    client = signed_in(alice)
    response = client.post(reverse("namespace-request"), {"cluster": cluster.pk, "name": "A_b"})
    assert response.status_code == 200
    with translation.override("he"):
        expected = translation.gettext("Use lower-case letters only.")
    assert expected != "Use lower-case letters only."
    assert expected in response.text


@pytest.mark.django_db
def test_it_answers_api_errors_in_the_language_asked_for(alice: User, cluster: Cluster) -> None:
    _, secret = AuthToken.objects.create(user=alice, expiry=None)
    api = APIClient(HTTP_AUTHORIZATION=f"Token {secret}")
    body = {"cluster": cluster.pk, "name": "kube-system"}
    english = api.post("/api/v1/namespace-requests/", body, format="json")
    hebrew = api.post("/api/v1/namespace-requests/", body, HTTP_ACCEPT_LANGUAGE="he", format="json")
    assert english.status_code == hebrew.status_code == 400
    assert "belongs to the cluster itself" in english.json()["name"][0]
    assert "שייך לאשכול עצמו" in hebrew.json()["name"][0]
    assert hebrew["Content-Language"] == "he"
    # DRF's own words come through Django's and our catalogs too.
    missing = APIClient().get("/api/v1/claims/", HTTP_ACCEPT_LANGUAGE="he")
    assert missing.status_code == 401
    assert "Authentication credentials were not provided." not in missing.json()["detail"]


@pytest.mark.django_db
def test_it_emails_a_hebrew_user_in_hebrew(
    alice: User, bob: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    Profile.objects.create(user=alice, language="he")
    claims = []
    for owner in (alice, bob):
        ns = services.namespace_request_submit(user=owner, cluster=cluster, name=f"ns-{owner}")
        claims.append(
            services.claim_request_submit(
                user=owner, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
            )
        )
    with django_capture_on_commit_callbacks() as callbacks:
        for claim in claims:
            services.claim_request_approve(user=carol, claim_request=claim)
    for notice in [c for c in callbacks if isinstance(c, notifications.Notice)]:
        notice.deliver()
    to_alice = next(m for m in mail.outbox if m.to == ["alice@example.org"])
    to_bob = next(m for m in mail.outbox if m.to == ["bob@example.org"])
    assert "אושר" in to_alice.subject and "train" in to_alice.subject
    assert "שלום alice" in to_alice.body
    assert to_bob.subject.startswith("Your claim train was approved")


def untranslated_words(template: Path) -> list[str]:
    text = PROGRAM_TEXT.sub(" ", TRANSLATED.sub(" ", template.read_text()))
    text = " ".join([text, *SAID_IN_ATTRIBUTES.findall(text)])
    text = MARKUP.sub(" ", text)
    return [word for word in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if word not in LATIN_WORDS]


def test_it_marks_every_word_of_the_templates_for_translation() -> None:
    """Text a template says outside {% translate %} and {% blocktranslate %} stays English
    on a Hebrew page: none may be left (program output and technical words aside)."""
    templates = [*(ROOT / "templates").rglob("*.html"), *(ROOT / "templates").rglob("*.txt")]
    found = {str(t.relative_to(ROOT)): words for t in templates if (words := untranslated_words(t))}
    assert found == {}


def _mo_catalog(path: Path) -> dict[Any, Any]:
    with path.open("rb") as mo:
        return dict(gettext.GNUTranslations(mo)._catalog)  # type: ignore[attr-defined]


def test_it_ships_a_compiled_catalog_that_matches_its_source(tmp_path: Path) -> None:
    fresh = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "--check", "-o", str(fresh), str(CATALOG / "django.po")], check=True)
    assert _mo_catalog(CATALOG / "django.mo") == _mo_catalog(fresh), (
        "locale/he/LC_MESSAGES/django.mo is older than its .po: run make messages"
    )


def test_it_has_a_hebrew_translation_of_every_string(tmp_path: Path) -> None:
    """makemessages on a copy of the sources: nothing new, untranslated or fuzzy."""
    po = _catalog_of_a_copy(tmp_path)
    stats = _run("msgfmt", "--statistics", "-o", "/dev/null", str(po)).stderr
    missing = _run("msgattrib", "--untranslated", "--no-obsolete", str(po)).stdout
    fuzzy = _run("msgattrib", "--only-fuzzy", "--no-obsolete", str(po)).stdout
    assert "untranslated" not in stats and "fuzzy" not in stats, (
        f"locale/he is missing some ({stats.strip()}): run makemessages -l he and translate\n"
        + missing
        + fuzzy
    )


def _catalog_of_a_copy(tmp_path: Path) -> Path:
    """locale/he's django.po as makemessages leaves it in a copy of the sources."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("*.pyc"))
        else:
            shutil.copy(source, tmp_path / name)
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "he", "--no-obsolete"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        env={"DEBUG": "True", "PATH": "/usr/bin:/bin", "PORTAL_VAR_DIR": str(tmp_path / "var")},
    )
    return tmp_path / "locale" / "he" / "LC_MESSAGES" / "django.po"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=True, capture_output=True, text=True)


def _extracted(tmp_path: Path) -> dict[str, str]:
    """What makemessages finds in a copy of the sources: each msgid and its flags line."""
    po = _catalog_of_a_copy(tmp_path).read_text()
    found = {}
    for entry in po.split("\n\n"):
        flags = "".join(line for line in entry.splitlines() if line.startswith("#,"))
        if match := re.search(r'^msgid ((?:".*"\n?)+)', entry, re.M):
            msgid = "".join(re.findall(r'"(.*)"', match[1]))
            found[msgid.replace('\\"', '"')] = flags
    return found


def test_it_puts_the_messages_rows_keep_in_the_catalog(tmp_path: Path) -> None:
    """The messages stored in English with values in them (an expiry, an extension, a rule's
    approval) are shown translated (claims.templatetags.portal.user_message): makemessages
    must find each, as a Python format for the translators to keep its values."""
    found = _extracted(tmp_path)
    for msgid in (*expiry.MESSAGES, *rules.MESSAGES):
        assert "python-format" in found.get(msgid, ""), msgid
    for msgid in (expiry.NO_REASON, expiry.UNDECIDED):
        assert msgid in found
