"""The management commands: demo logins, registering a cluster, and the whole demo."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from claims.models import Cluster
from claims.read.selectors import user_is_approver

ROOT = Path(__file__).resolve().parents[3]


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def test_it_creates_the_demo_logins_once(db: None) -> None:
    printed = run("seed_demo_users")
    assert "login: admin  password: admin" in printed
    assert "login: alice  password: alice" in printed
    assert user_is_approver(authenticate(username="admin", password="admin"))
    assert not user_is_approver(authenticate(username="alice", password="alice"))
    assert "(unchanged)" in run("seed_demo_users")
    assert User.objects.count() == 2


def test_it_registers_a_cluster_with_what_it_discovered(db: None, kubesim_cluster: Any) -> None:
    printed = run("ensure_cluster", "--name", "lab", "--kubeconfig", kubesim_cluster.kubeconfig)
    cluster = Cluster.objects.get(name="lab")
    assert cluster.server_version == "v1.34.1"
    assert cluster.preferred_resource_version == "v1"
    assert cluster.device_count("gpu.nvidia.com") == 8
    assert "resource.k8s.io v1, v1beta2, v1beta1 (using v1)" in printed
    run("ensure_cluster", "--name", "lab", "--kubeconfig", kubesim_cluster.kubeconfig)
    assert Cluster.objects.count() == 1


def test_it_says_when_the_cluster_cannot_be_reached(db: None, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
        "users: [{name: x, user: {token: t}}]\n"
    )
    with pytest.raises(CommandError, match="cannot read"):
        run("ensure_cluster", "--kubeconfig", str(kubeconfig), "--wait", "0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_output(process: subprocess.Popen, log: Path, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while needle not in log.read_text(errors="replace"):
        assert process.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.2)


def start_demo(folder: Path, *, sigint_ignored: bool = False) -> tuple[subprocess.Popen, int, Path]:
    """`manage.py rundemo` as `make run` starts it, in its own var folder; (process, port, log).
    sigint_ignored: started as by nohup, or by a test runner's worker that ignores Ctrl-C."""
    port, log = free_port(), folder / "demo.log"
    env = {**os.environ, "PORTAL_VAR_DIR": str(folder), "DATABASE_URL": "", "REDIS_URL": ""}
    env.update({"DEBUG": "True", "PYTHONUNBUFFERED": "1"})  # as `make run`: demo logins
    env.pop("KUBECONFIG", None)
    env.pop("KUBESIM_SPEED", None)
    with log.open("w") as out:
        demo = subprocess.Popen(
            [sys.executable, "manage.py", "rundemo", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # as in a terminal: the demo's group gets the Ctrl-C
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored
            else None,
        )
    return demo, port, log


def test_it_runs_the_whole_demo_and_stops_it_all(tmp_path: Path) -> None:
    demo, port, log = start_demo(tmp_path)
    try:
        wait_for_output(demo, log, "The portal is at", timeout=120)
        printed = log.read_text()
        assert "login: admin" in printed and "login: alice" in printed
        assert "devices {'gpu.nvidia.com': 8}" in printed
        assert "kubesim runs at speed 1 " in printed  # a run takes seconds: one can watch it
        page = wait_for_page(f"http://127.0.0.1:{port}/accounts/login/")
        assert page.status == 200
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=30)
    assert "kubesim stopped" in log.read_text()
    assert processes_with_env(f"PORTAL_VAR_DIR={tmp_path}") == []


def test_ctrl_c_stops_the_whole_demo_quietly(tmp_path: Path) -> None:
    """A terminal sends Ctrl-C's SIGINT to its foreground process group: the runner stops its
    children in order. Each had it at once: kubesim went, and the follower still watching it
    printed a screen of "cannot reach the cluster", and the runner called it unexpected.
    Started with Ctrl-C ignored (nohup, a test runner's worker), it stops all the same: once
    it did not, and its children outlived it."""
    demo, _, log = start_demo(tmp_path, sigint_ignored=True)
    try:
        wait_for_output(demo, log, "The portal is at", timeout=120)
        os.killpg(demo.pid, signal.SIGINT)
        assert demo.wait(timeout=60) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    printed = log.read_text()
    stopping = printed.split("Stopping...")[-1]
    assert "unexpectedly" not in printed and "Traceback" not in stopping, printed
    assert "cannot reach the cluster" not in stopping and " WARNING " not in stopping, stopping
    assert "kubesim stopped" in stopping
    assert processes_with_env(f"PORTAL_VAR_DIR={tmp_path}") == []


def processes_with_env(entry: str) -> list[int]:
    """Running processes (the demo's children) whose environment holds entry."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if entry.encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def wait_for_page(url: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return urllib.request.urlopen(url, timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_it_keeps_ordinary_requests_out_of_the_demo_log(tmp_path: Path) -> None:
    """`make run` printed a line per request, static files and page loads included (500 lines
    in 8 minutes), and the URL scrolled away; only what went wrong is worth a line."""
    demo, port, log = start_demo(tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_output(demo, log, "The portal is at", timeout=120)
        assert wait_for_page(f"{base}/static/css/portal.css").status == 200
        assert wait_for_page(f"{base}/accounts/login/").status == 200
        assert wait_for_page(f"{base}/").status == 200  # redirected to the login page
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base}/no-such-page/", timeout=5)
        wait_for_output(demo, log, '"GET /no-such-page/ HTTP/1.1" 404', timeout=10)
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=30)
    printed = log.read_text()
    assert f"The portal is at http://127.0.0.1:{port}/" in printed
    assert "GET /static/" not in printed, printed
    assert '"GET /accounts/login/' not in printed and '"GET / ' not in printed, printed
