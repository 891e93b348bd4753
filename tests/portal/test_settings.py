"""The settings a deployment sees: .env.example and docker-compose.yml."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
READERS = re.compile(r"""(?:getenv|envbool|envint|envlist)\(\s*["']([A-Z0-9_]+)["']""")


def variables_read() -> set[str]:
    sources = [*ROOT.glob("portal/*.py"), *ROOT.glob("claims/management/commands/*.py")]
    return {name for path in sources for name in READERS.findall(path.read_text())}


def test_it_documents_every_variable_the_portal_reads() -> None:
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert {"API_THROTTLE_USER", "API_THROTTLE_ANON", "API_IDEMPOTENCY_TTL_HOURS"} <= documented
    assert variables_read() - documented == set()


def test_it_serves_the_site_with_threads_beside_long_polls() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    script = shlex.split(compose["services"]["web"]["command"])[-1]  # sh -c "..."
    gunicorn = script[script.index("gunicorn") :].split()
    assert gunicorn[gunicorn.index("--worker-class") + 1] == "gthread"
    assert int(gunicorn[gunicorn.index("--threads") + 1]) >= 16
    checked = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--check-config", *gunicorn[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
