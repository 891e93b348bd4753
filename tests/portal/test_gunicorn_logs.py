"""gunicorn's own lines in production: JSON, and an access line per request carrying the
request id the portal answered with (portal/gunicorn_conf.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.fixtures.kubesim import wait_until
from tests.fixtures.portal import _test_database_url

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def web(transactional_db: None, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port, log = free_port(), tmp_path / "gunicorn.log"
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DEBUG": "False", "LOG_FORMAT": ""}
    command = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}"]
    command += ["--config", "python:portal.gunicorn_conf", "--workers", "1"]
    with log.open("w") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url + "/healthz"), timeout=30)
        yield url, log
    finally:
        server.terminate()
        server.wait(timeout=30)


def lines_of(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_it_writes_gunicorn_lines_as_json_with_the_request_id(web: tuple[str, Path]) -> None:
    url, log = web
    answer = requests.get(url + "/accounts/login/?next=/secret-token", timeout=10)
    request_id = answer.headers["X-Request-ID"]

    def access_line() -> dict | None:
        found = [line for line in lines_of(log) if line.get("logger") == "gunicorn.access"]
        return next((line for line in found if line.get("path") == "/accounts/login/"), None)

    line = wait_until(access_line, timeout=30)
    assert line["request_id"] == request_id
    assert (line["method"], line["status"]) == ("GET", 200)
    assert "secret-token" not in json.dumps(line)  # the query is never logged
    started = [line for line in lines_of(log) if line.get("logger") == "gunicorn.error"]
    assert any("Listening at" in line["message"] for line in started)
