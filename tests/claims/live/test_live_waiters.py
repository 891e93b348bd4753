"""Waiting requests cannot take the site down: against gunicorn with few threads, many
live-page waits are held open (up to the bound, the rest answered at once) while the login
page still answers, and a change still reaches the ones that wait."""

from __future__ import annotations

import html
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from claims.domain import services
from claims.models import ClaimRequest
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.fixtures.portal import _test_database_url, wait_until

ROOT = Path(__file__).resolve().parents[3]
THREADS = 4
BOUND = 3  # waits one process holds; the fourth thread stays for everything else
WAITERS = 12


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def site(transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """gunicorn as in production (gthread), on this test's database and Redis."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "LIVE_WAIT_SECONDS": "60",
        "LIVE_WAITERS_MAX": str(BOUND),
        "LIVE_WAITERS_PER_USER": str(BOUND),
    }
    command = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--worker-class", "gthread", "--threads", str(THREADS)]
    with (tmp_path / "gunicorn.log").open("w") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url + "/accounts/login/"), timeout=30)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def watcher_url(page: str) -> str:
    return html.unescape(page.split('id="claim-watch" hx-get="', 1)[1].split('"', 1)[0])


def test_it_answers_the_login_page_while_many_requests_wait(
    site: str, claim: ClaimRequest, alice: User
) -> None:
    client = Client()
    client.force_login(alice)
    browser = requests.Session()
    browser.cookies.set("sessionid", client.cookies["sessionid"].value)
    page = browser.get(f"{site}/claims/{claim.pk}/", timeout=10)
    assert page.status_code == 200
    watch = site + watcher_url(page.text)

    answered: list[str] = []

    def wait() -> None:
        answered.append(browser.get(watch, headers={"HX-Request": "true"}, timeout=90).text)

    threads = [threading.Thread(target=wait) for _ in range(WAITERS)]
    for thread in threads:
        thread.start()
    # Past the bound the waits answer at once and tell the page to ask again later.
    wait_until(lambda: len(answered) >= WAITERS - BOUND, timeout=60)
    assert all("load delay:5s" in answer for answer in answered)

    login = requests.get(f"{site}/accounts/login/", timeout=5)
    assert login.status_code == 200
    assert len(answered) == WAITERS - BOUND  # the others still wait

    services.claim_request_release(user=alice, claim_request=claim)
    wait_until(lambda: len(answered) == WAITERS, timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    assert sum("state-released" in answer for answer in answered) == BOUND
