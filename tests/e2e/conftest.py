"""A real Chromium, driven by Playwright, against pytest-django's live server."""

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import Browser, Page

import kubesim
from claims.clusters import gateways
from claims.models import Cluster
from tests.fixtures.kubesim import SHARED_TOPOLOGY
from tests.fixtures.portal import register_cluster

# Slow enough that a person (and the test) sees the claim allocated while the run's Pod lives:
# about 1 s pulling and 1.5 s running.
KUBELET_SPEED = float(os.environ.get("E2E_KUBESIM_SPEED", "2"))
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def e2e_kubesim() -> Iterator[kubesim.Handle]:
    handle = kubesim.start(speed=KUBELET_SPEED, topology=SHARED_TOPOLOGY)
    yield handle
    handle.stop()


@pytest.fixture
def e2e_cluster(transactional_db: None, e2e_kubesim: kubesim.Handle) -> Iterator[Cluster]:
    yield register_cluster(e2e_kubesim)
    gateways.forget_gateways()


def _new_page(browser: Browser) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(10_000)
    return context.new_page()


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[[], Page]]:
    """Opens a fresh browser context per call, so two personas can work side by side."""
    pages: list[Page] = []

    def open_() -> Page:
        page = _new_page(browser)
        pages.append(page)
        return page

    yield open_
    for page in pages:
        page.context.close()


def log_in(page: Page, base_url: str, username: str, password: str) -> None:
    page.goto(base_url + reverse("login"))
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("main form button[type=submit]")  # not the menu's language buttons
    page.wait_for_url(f"{base_url}/")


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
