"""docs/api.md and docs/examples/claim_gpu.py, run for real: a live portal, a real Celery
worker and beat, kubesim. If the docs drift from the API, these fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from knox.models import AuthToken

from claims.models import Cluster
from tests.fixtures.portal import wait_until
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "api.md"
EXAMPLE = ROOT / "docs" / "examples" / "claim_gpu.py"


def with_worker(test: Callable) -> Callable:
    """A real Celery worker and beat behind the live portal; they need committed data."""
    test = pytest.mark.django_db(transaction=True)(test)
    return pytest.mark.usefixtures("celery_beat_process")(test)


def sh_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)


def token_of(user: User) -> str:
    return AuthToken.objects.create(user=user, expiry=None)[1]


def unique_namespace() -> str:
    # kubesim lives for the whole session: each test gets a namespace of its own.
    return f"docs-{uuid.uuid4().hex[:8]}"


def test_it_has_a_walkthrough_to_run() -> None:
    blocks = sh_blocks(API_DOC.read_text())
    assert len(blocks) >= 6
    assert all("curl" in block for block in blocks)


@with_worker
def test_it_runs_the_curl_walkthrough(
    live_server: Any, alice: User, carol: User, cluster: Cluster
) -> None:
    seeded_profile(BATCH)
    seeded_profile(JUPYTER)
    env = {
        **os.environ,
        "PORTAL": live_server.url,
        "TOKEN": token_of(alice),
        "APPROVER_TOKEN": token_of(carol),
        "NS": unique_namespace(),
    }
    script = "set -euo pipefail\n" + "\n".join(sh_blocks(API_DOC.read_text()))
    result = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    output = result.stdout
    assert result.returncode == 0, f"{output}\n{result.stderr}"
    assert '"is_approver": false' in output
    assert '"line": "8 devices match, ' in output  # the picker preview
    assert '"decided_by": "carol"' in output
    assert "claim: waiting" in output and "run: succeeded" in output
    assert '"passed": true' in output
    assert "Test PASSED" in output and "Result = PASS" in output
    assert '"state_message": "Cancelled by alice."' in output
    assert "HTTP 409" in output
    # The job ran on kubesim to its end: its exit code, its Job's reason and its log.
    assert "job: failed" in output
    assert '"exit_code": 3' in output
    assert "BackoffLimitExceeded" in output
    assert "train-sim: failed, exiting with code 3" in output
    assert "does not parse as shell words" in output and "is not a name Kubernetes" in output
    assert '"port_forward": "kubectl --kubeconfig ' in output
    assert '"state_message": "Stopped by alice."' in output
    assert '"state": "released"' in output


@with_worker
def test_it_runs_the_python_example(
    live_server: Any, alice: User, carol: User, cluster: Cluster
) -> None:
    env = {**os.environ, "PORTAL_URL": live_server.url, "PORTAL_TOKEN": token_of(alice)}
    command = [sys.executable, str(EXAMPLE), "--namespace", unique_namespace(), "--claim", "gpu"]
    script = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        approve_when_asked(live_server.url, token_of(carol))
        output, _ = script.communicate(timeout=90)
    finally:
        script.kill()
    assert script.returncode == 0, output
    assert "waiting for approval" in output
    assert re.search(r"^Device: \S+ \(pool \S+\) on node \S+$", output, flags=re.MULTILINE)
    assert re.search(r"^GPU: NVIDIA .+, compute capability \d+\.\d+, \d+ MiB$", output, re.M)
    assert "Test PASSED" in output and "Result = PASS" in output
    assert "Verification succeeded" in output


def approve_when_asked(url: str, approver_token: str) -> None:
    """What an approver does: find the pending claim through the API and approve it."""
    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Token {approver_token}"

    def pending_claims() -> list[dict]:
        return session.get(f"{url}/api/v1/claims/?state=pending", timeout=10).json()["results"]

    claim = wait_until(pending_claims, timeout=30)[0]
    response = session.post(f"{url}/api/v1/claims/{claim['id']}/approve/", timeout=10)
    assert response.json()["state"] == "approved"
