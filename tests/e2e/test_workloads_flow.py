"""Work on the GPU in a real browser, with a real Celery worker and the cluster loops, against
kubesim: alice starts a batch job from her approved claim's page and watches it run and
succeed (its log lines, exit code 0, the GPU it got, its Pod's Events), downloads its log, sees
a failing one fail with the Job controller's reason, then starts a notebook, sees it running
and answering through the API server's pod proxy with its token, and stops it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import Page, expect

import kubesim
from claims.models import ClaimRequest, Cluster, Workload
from tests.claims.worker.test_workload_steps import waiting_claim
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_flow import assert_not_reloaded, mark_page
from tests.fixtures.kubesim import raw_request
from tests.fixtures.portal import PASSWORD
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

pytestmark = pytest.mark.e2e
TRAIN = "ghcr.io/gpu-portal/train-sim:1.0"
# ms: a workload goes through the worker, the scheduler, a pull and its run; a failing one
# through the Job's retries and their back-off too. Generous for a loaded CI machine.
TO_RUN = 60_000
TO_FAIL = 120_000


def start(page: Page, base: str, claim: ClaimRequest, profile: str, **fields: str) -> None:
    page.goto(base + reverse("claim", args=[claim.pk]))
    page.locator("#start-workload").click()
    page.select_option("#id_profile", value=str(seeded_profile(profile).pk))
    for name, value in fields.items():
        page.fill(f"#id_{name}", value)
    if "args" in fields:
        expect(page.locator("#manifest-yaml")).to_contain_text(fields["args"].split()[0])
    page.get_by_role("button", name="Start", exact=True).click()
    expect(page.locator("#workload-status")).to_be_visible()
    mark_page(page)


def see_the_job_succeed(page: Page) -> None:
    state = page.locator("#workload-state-title")
    expect(page.locator("#log-main")).to_contain_text("epoch 1/1 step 1/6", timeout=TO_RUN)
    expect(state).to_contain_text("succeeded", timeout=TO_RUN)
    expect(page.locator("#log-main")).to_contain_text("train-sim: done")
    expect(page.locator("#workload-exit-code")).to_have_text("0")
    expect(page.locator("#workload-gpu")).to_contain_text("NVIDIA")
    expect(page.locator("#workload-events")).to_contain_text("Started")
    expect(page.locator("#workload-duration")).to_be_visible()
    expect(page.locator("#stop-workload")).to_have_count(0)
    assert_not_reloaded(page)
    screenshot(page, "workload-job-succeeded")
    with page.expect_download() as download:
        page.locator("#download-log").click()
    assert "train-sim: done" in Path(download.value.path()).read_text()


def see_the_job_fail(page: Page) -> None:
    expect(page.locator("#workload-state-title")).to_contain_text("failed", timeout=TO_FAIL)
    expect(page.locator("#workload-message")).to_contain_text(
        "The Job failed (BackoffLimitExceeded): Job has reached the specified backoff limit"
    )
    expect(page.locator("#workload-exit-code")).to_have_text("3")
    expect(page.locator("#log-main")).to_contain_text("train-sim: failed, exiting with code 3")
    assert_not_reloaded(page)
    screenshot(page, "workload-job-failed")


def see_the_notebook_answer(page: Page, handle: kubesim.Handle) -> None:
    expect(page.locator("#workload-state-title")).to_contain_text("running", timeout=TO_RUN)
    expect(page.locator("#port-forward")).to_contain_text("port-forward service/")
    token = page.locator("#notebook-token code").inner_text()
    notebook = Workload.objects.get(kind="notebook")
    proxy = f"/api/v1/namespaces/{notebook.claim.namespace}/pods/{notebook.name}:8888/proxy"
    assert raw_request(handle, "GET", f"{proxy}/api/status").status == 403
    answer = raw_request(handle, "GET", f"{proxy}/lab?token={token}")
    assert answer.status == 200 and b"<title>JupyterLab</title>" in answer.body
    expect(page.locator("#log-main")).to_contain_text("Jupyter Server", timeout=TO_RUN)
    # Jupyter prints its URL with the token; the log (approvers read it too) does not keep it.
    expect(page.locator("#log-main")).to_contain_text("lab?token=<token: on the notebook's page>")
    expect(page.locator("#log-main")).not_to_contain_text(token)
    expect(page.locator("#workload-events")).to_contain_text("Started", timeout=TO_RUN)
    assert_not_reloaded(page)
    screenshot(page, "workload-notebook")


def test_it_runs_a_batch_job_and_a_notebook_on_an_approved_claim(
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    e2e_cluster: Cluster,
    e2e_kubesim: kubesim.Handle,
    celery_worker_process: Any,
) -> None:
    for profile in (BATCH, JUPYTER):  # before any page lists them
        seeded_profile(profile)
    claim = waiting_claim(alice, e2e_cluster)
    base = live_server.url
    page = open_page()
    log_in(page, base, "alice", PASSWORD)

    start(page, base, claim, BATCH, image=TRAIN, command="train-sim", args="--steps 6")
    see_the_job_succeed(page)

    page.get_by_role("button", name="Run again").click()
    expect(page.locator("#workload-status")).to_be_visible()
    assert Workload.objects.filter(args="--steps 6").count() == 2
    page.locator("#stop-workload").click()
    page.get_by_role("button", name="Stop it").click()
    expect(page.locator("#workload-state-title")).to_contain_text("stopped")

    start(page, base, claim, BATCH, image=TRAIN, command="train-sim", args="--exit-code 3")
    see_the_job_fail(page)

    start(page, base, claim, JUPYTER)
    see_the_notebook_answer(page, e2e_kubesim)
    page.locator("#stop-workload").click()
    page.get_by_role("button", name="Stop it").click()
    expect(page.locator("#workload-state-title")).to_contain_text("stopped")
    expect(page.locator("#notebook-access")).to_have_count(0)
