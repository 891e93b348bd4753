"""The settings a deployment sees: .env.example and docker-compose.yml."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.fixtures.portal import TEST_REDIS_URL

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


def compose_services() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def health_command(service: str, **replace: str) -> list[str]:
    """The service's health check as a command to run here, with addresses replaced."""
    test = compose_services()[service]["healthcheck"]["test"]
    assert test[0] == "CMD"
    command = test[1:]
    for old, new in replace.items():
        command = [part.replace(old, new) for part in command]
    here = {"python": sys.executable, "celery": str(Path(sys.executable).with_name("celery"))}
    return [here.get(part, part) for part in command]


def test_it_restarts_every_service_and_checks_its_health() -> None:
    services = compose_services()
    assert set(services) == {"postgres", "redis", "kubesim", "web", "worker", "beat", "follower"}
    for name, service in services.items():
        assert service.get("restart") == "unless-stopped", name
        assert service["healthcheck"]["test"], name
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert services["worker"]["healthcheck"]["test"][1:5] == ["celery", "-A", "portal", "inspect"]
    assert "https://127.0.0.1:6443/_kubesim/healthz" in " ".join(
        services["kubesim"]["healthcheck"]["test"]
    )


def test_it_ships_no_secret_no_wildcard_host_and_no_demo_logins() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    environment = compose_services()["web"]["environment"]
    assert environment["SECRET_KEY"].startswith("${SECRET_KEY:?")
    assert "*" not in environment["ALLOWED_HOSTS"]
    assert environment["DEBUG"] == "False"
    assert "seed_demo_users" not in text and "admin/admin" not in text


def test_its_kubesim_health_check_passes_on_a_live_kubesim(kubesim_cluster: Any) -> None:
    port = str(urlsplit(kubesim_cluster.url).port)
    checked = subprocess.run(health_command("kubesim", **{"6443": port}), timeout=30)
    assert checked.returncode == 0
    stopped = subprocess.run(health_command("kubesim", **{"6443": "9"}), capture_output=True)
    assert stopped.returncode != 0


def test_its_web_health_check_passes_on_a_live_portal(live_server: Any) -> None:
    port = str(urlsplit(live_server.url).port)
    checked = subprocess.run(health_command("web", **{"8000": port}), timeout=30)
    assert checked.returncode == 0


def test_its_beat_health_check_wants_a_fresh_schedule_file(tmp_path: Path) -> None:
    command = health_command("beat", **{"/data/": f"{tmp_path}/"})
    assert subprocess.run(command).returncode == 1  # none yet
    (tmp_path / "celerybeat-schedule.db").write_bytes(b"")
    assert subprocess.run(command).returncode == 0
    os.utime(tmp_path / "celerybeat-schedule.db", (0, time.time() - 600))
    assert subprocess.run(command).returncode == 1


def test_its_worker_health_check_pings_a_live_worker(
    celery_processes: dict[str, subprocess.Popen],
) -> None:
    env = {**os.environ, "CELERY_BROKER_URL": TEST_REDIS_URL}
    checked = subprocess.run(health_command("worker"), cwd=ROOT, env=env, timeout=60)
    assert checked.returncode == 0


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**environ, "PORTAL_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
    )


def test_it_refuses_to_start_without_a_secret_key_when_debug_is_off(tmp_path: Path) -> None:
    refused = manage(tmp_path, "check")
    assert refused.returncode != 0
    assert "SECRET_KEY is not set" in refused.stderr and "Traceback" in refused.stderr
    assert manage(tmp_path, "check", DEBUG="True").returncode == 0  # a local key
    assert manage(tmp_path, "check", SECRET_KEY="x" * 50).returncode == 0


def production_environment() -> dict[str, str]:
    lines = (ROOT / "docs/production.env").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if line and not line.startswith("#")]
    return {name: value for name, value in pairs}


def test_its_documented_production_environment_reads_as_meant(tmp_path: Path) -> None:
    script = (
        "from django.conf import settings as s; print(s.DEBUG, s.SECURE_PROXY_SSL_HEADER, "
        "s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, s.REST_FRAMEWORK['NUM_PROXIES'])"
    )
    env = {**production_environment(), "SECRET_KEY": "k" * 50}
    shown = manage(tmp_path, "shell", "-c", script, **env)
    assert shown.stdout.split("\n")[-2] == (
        "False ('HTTP_X_FORWARDED_PROTO', 'https') 31536000 True 1"
    ), shown.stderr
