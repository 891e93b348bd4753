"""The namespace page in a real browser: access appears by itself once the worker has set it
up, and the downloaded kubeconfig works with the real kubectl."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from claims.domain import services
from claims.models import Cluster
from tests.claims.domain.test_access import restricted
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_flow import LIVE, assert_not_reloaded, mark_page
from tests.fixtures.portal import PASSWORD

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    home = kubeconfig.parent
    env = {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
    env.pop("KUBECONFIG", None)
    command = ["kubectl", "--kubeconfig", str(kubeconfig), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_it_offers_the_kubeconfig_as_soon_as_access_is_set_up(
    live_server: Any,
    open_page: Callable[[], Page],
    alice: User,
    carol: User,
    e2e_cluster: Cluster,
    celery_beat_process: Any,
    tmp_path: Path,
) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=e2e_cluster, name="access-ml")
    page = open_page()
    log_in(page, live_server.url, "alice", PASSWORD)
    page.get_by_role("link", name="access-ml", exact=True).click()
    expect(page.locator("#access")).to_contain_text("Access comes once the namespace is active")
    mark_page(page)
    services.namespace_request_approve(user=carol, namespace_request=ns)

    button = page.get_by_role("button", name="Download kubeconfig")
    expect(button).to_be_visible(timeout=LIVE)
    expect(page.locator("#namespace-live")).to_contain_text("gpu-portal-alice")
    assert_not_reloaded(page)
    screenshot(page, "namespace-access")
    with page.expect_download() as download:
        button.click()
    assert download.value.suggested_filename == "kubesim-access-ml.kubeconfig"
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)

    flags = restricted("shell")  # the namespace enforces Pod Security "restricted"
    ran = kubectl(saved, "run", "shell", "--image=busybox", "--restart=Never", *flags, "--", "true")
    assert ran.returncode == 0, ran.stderr
    assert "pod/shell created" in ran.stdout
