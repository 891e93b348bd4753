"""The product as a newcomer first meets it: `make run` with its own defaults.

One demo for the module, started as `make run` starts it (`manage.py rundemo`, DEBUG on, no
DATABASE_URL, REDIS_URL or KUBECONFIG: SQLite, the SQLite-file broker, kubesim at its own
speed, the worker, beat and the follower), in a clean environment of its own. The rest of the
suite runs on PostgreSQL; this is the one configuration a demo, a reviewer or a new user tries
first, and it once answered every claim page with a 500 that no test saw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.claims.management.test_commands import ROOT, free_port, wait_for_output

pytestmark = pytest.mark.e2e
# ms: kubesim at make run's speed takes a few seconds per run; generous for a loaded CI.
LIVE = 30_000
# Only what a developer's shell would carry: none of the suite's settings leak in.
GPU = "gpu.nvidia.com"
KEPT_FROM_SHELL = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CHROMIUM_PATH")


@dataclass
class Demo:
    url: str
    log: Path
    process: subprocess.Popen

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def demo_environment(folder: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in KEPT_FROM_SHELL if name in os.environ}
    # As the Makefile's `run` target: DEBUG=True; the var folder is this module's own.
    env.update({"DEBUG": "True", "PORTAL_VAR_DIR": str(folder), "PYTHONUNBUFFERED": "1"})
    return env


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("make-run")
    port, log = free_port(), folder / "demo.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "rundemo", "--port", str(port)],
            cwd=ROOT,
            env=demo_environment(folder),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = Demo(f"http://127.0.0.1:{port}", log, process)
    try:
        wait_for_output(process, log, "The portal is at", timeout=120)
        yield started
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert "Traceback" not in started.output(), started.output()


def test_it_runs_on_sqlite_and_the_file_broker(demo: Demo) -> None:
    settings_seen = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW_BACKENDS],
        cwd=ROOT,
        env=demo_environment(Path(demo.log.parent)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "sqlite3" in settings_seen and "SQLiteBroker" in settings_seen


SHOW_BACKENDS = (
    "from django.conf import settings; "
    "print(settings.DATABASES['default']['ENGINE'], settings.CELERY_BROKER_TRANSPORT)"
)


# -- the browser flow -------------------------------------------------------------------


def new_page(browser: Browser) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(LIVE)
    return context.new_page()


def log_in(page: Page, demo: Demo, username: str) -> None:
    page.goto(demo.url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", username)  # the demo logins: admin/admin, alice/alice
    page.click("main form button[type=submit]")
    page.wait_for_url(demo.url + "/")


def fail_on_server_errors(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else 0)
    return errors


def alice_asks(page: Page) -> None:
    page.get_by_role("link", name="Request namespace").click()
    page.fill("input[name=name]", "first-ml")
    page.fill("textarea[name=purpose]", "Trying the portal")
    page.get_by_role("button", name="Request namespace").click()
    expect(page.locator("#dashboard-live")).to_contain_text("first-ml")
    page.get_by_role("link", name="Request GPU claim").click()
    page.fill("input[name=name]", "first-gpu")
    page.fill("textarea[name=purpose]", "Check the GPU works")
    expect(page.locator("#manifest-yaml")).to_contain_text("name: first-gpu")
    page.get_by_role("button", name="Submit for approval").click()
    expect(page.locator("h1")).to_contain_text("first-gpu")
    expect(page.locator("#claim-live")).to_contain_text("pending")


def admin_approves(page: Page) -> None:
    page.get_by_role("link", name="Approvals").click()
    for row in (
        page.locator("tr[id^=namespace-request-]", has_text="first-ml"),
        page.locator("tr", has_text="first-gpu"),
    ):
        row.get_by_role("button", name="Approve").click()
        expect(row).to_contain_text("by admin")


def alice_verifies(page: Page) -> None:
    page.reload()
    expect(page.locator("#claim-live")).to_contain_text("ready · not in use", timeout=LIVE)
    page.get_by_role("button", name="Run CUDA verification").click()
    expect(page.locator("h1")).to_contain_text("CUDA verification")
    expect(page.locator("#log-ctr0")).to_contain_text("Test PASSED", timeout=LIVE)
    expect(page.locator("#log-ctr1")).to_contain_text("Result = PASS", timeout=LIVE)
    expect(page.locator("#run-verdict")).to_contain_text("PASS", timeout=LIVE)
    expect(page.locator("#run-live")).to_contain_text("succeeded")


def test_a_newcomer_goes_from_request_to_a_verified_gpu(demo: Demo, browser: Browser) -> None:
    scientist, approver = new_page(browser), new_page(browser)
    errors = fail_on_server_errors(scientist) + fail_on_server_errors(approver)
    log_in(scientist, demo, "alice")
    alice_asks(scientist)
    claim_page = scientist.url
    log_in(approver, demo, "admin")
    admin_approves(approver)
    scientist.goto(claim_page)
    alice_verifies(scientist)
    for page in (scientist, approver):
        page.goto(demo.url + "/")
        expect(page.locator("#dashboard-live")).to_contain_text("first-gpu")
    approver.goto(demo.url + "/audit/")
    expect(approver.locator("main")).to_contain_text("first-gpu")
    assert errors == []
    for page in (scientist, approver):
        page.context.close()


# -- the API, as a script on the default set-up uses it ----------------------------------


class Client:
    """A script's HTTP client: session login (the API takes the cookie with X-CSRFToken)."""

    def __init__(self, demo: Demo, username: str) -> None:
        self.base = demo.url
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.opener.open(self.base + "/accounts/login/").read()
        self.send(
            "POST",
            "/accounts/login/",
            form={"username": username, "password": username},
        )

    def csrf(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken")

    def send(
        self, method: str, path: str, body: Any = None, form: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        headers = {"X-CSRFToken": self.csrf(), "Referer": self.base + "/"}
        data = None
        if form is not None:
            data = urllib.parse.urlencode({**form, "csrfmiddlewaretoken": self.csrf()}).encode()
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with self.opener.open(request, timeout=90) as answer:
                status, kind, raw = answer.status, answer.headers["Content-Type"], answer.read()
        except urllib.error.HTTPError as error:
            status, kind, raw = error.code, error.headers["Content-Type"], error.read()
        is_json = (kind or "").startswith("application/json")
        return status, json.loads(raw) if is_json else raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.send(method, path, body)
        assert status in (200, 201), (status, answer)
        return answer

    def wait_until(self, path: str, states: str) -> Any:
        deadline = time.monotonic() + LIVE / 1000 * 3
        while True:
            found = self.ok("GET", f"{path}?wait=30&until={states}")
            if found["state"] in states.split(",") or time.monotonic() > deadline:
                return found


def test_a_script_does_the_flow_through_the_api(demo: Demo) -> None:
    alice, admin = Client(demo, "alice"), Client(demo, "admin")
    assert alice.ok("GET", "/api/v1/me/")["username"] == "alice"
    ns = alice.ok("POST", "/api/v1/namespace-requests/", {"name": "api-ml", "purpose": "API"})
    status, refused = alice.send(
        "POST",
        "/api/v1/claims/",
        {"namespace_request": ns["id"], "name": "Bad Name", "device_class": GPU},
    )
    assert status == 400 and "name" in refused
    claim = alice.ok(
        "POST",
        "/api/v1/claims/",
        {"namespace_request": ns["id"], "name": "api-gpu", "device_class": GPU, "purpose": "API"},
    )
    admin.ok("POST", f"/api/v1/namespace-requests/{ns['id']}/approve/")
    admin.ok("POST", f"/api/v1/claims/{claim['id']}/approve/")
    applied = alice.wait_until(f"/api/v1/claims/{claim['id']}/", "waiting,in_use,failed")
    assert applied["state"] == "waiting", applied
    run = alice.ok("POST", "/api/v1/runs/", {"claim": claim["id"]})
    finished = alice.wait_until(f"/api/v1/runs/{run['id']}/", "succeeded,failed")
    assert finished["state"] == "succeeded", finished
    status, log = alice.send("GET", f"/api/v1/runs/{run['id']}/logs/ctr0/")
    assert status == 200 and "Test PASSED" in log
    listed = alice.ok("GET", "/api/v1/claims/?namespace=api-ml&state=waiting&state=in_use")
    assert [found["name"] for found in listed["results"]] == ["api-gpu"]
    assert alice.ok("GET", f"/api/v1/events/?object_kind=claim_request&object_id={claim['id']}")[
        "results"
    ]
    status, _ = alice.send("DELETE", f"/api/v1/claims/{claim['id']}/")
    assert status in (200, 202, 204)
    assert alice.wait_until(f"/api/v1/claims/{claim['id']}/", "released")["state"] == "released"
