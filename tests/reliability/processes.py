"""Processes the fault tests start, kill and start again: Celery workers and a Redis."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from portal.celery import app as celery_app
from tests.fixtures.portal import (
    ROOT,
    TEST_QUEUE,
    WORKER_SETTINGS,
    _celery_env,
    wait_until,
)

# The worker's reconciler sends work that sat still for 3 s again (30 s in production), so a
# test sees lost messages found within its budget.
FAST_RECONCILER = {"RECONCILE_STALE_SECONDS": "3", "RECONCILE_INTERVAL_SECONDS": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_worker(folder: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """A prefork worker with beat inside, in a process group of its own (to kill it whole),
    working the session's test queue."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"reliability-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
    args = ["worker", "-B", "-s", str(folder / f"beat-{uuid.uuid4().hex[:6]}"), "-Q", TEST_QUEUE]
    args += ["-P", "prefork", "-c", "4", "-l", "info", "-n", name, "--without-gossip"]
    args += ["--without-mingle", "--without-heartbeat"]
    env = _celery_env({**WORKER_SETTINGS, **FAST_RECONCILER, **(extra_env or {})})
    log = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", *args],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_ready(log, process)
    return process


def wait_for_ready(log: Path, process: subprocess.Popen) -> None:
    """Generous: on a loaded 2-core machine a prefork worker with beat takes over 30 s."""

    def ready() -> bool:
        assert process.poll() is None, log.read_text(errors="replace")
        return "ready." in log.read_text(errors="replace")

    wait_until(ready, timeout=120, interval=0.1)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to the process and every child it forked: nothing gets to clean up."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def group_gone(process: subprocess.Popen) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return True
    return False


def kill_group_and_wait(process: subprocess.Popen) -> None:
    kill_group(process)
    wait_until(lambda: group_gone(process), timeout=30)


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


def start_redis(port: int, folder: Path) -> subprocess.Popen:
    """An empty Redis of the test's own: no snapshot, no append-only file."""
    binary = redis_server_binary()
    assert binary, "no redis-server"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", str(folder)]
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    wait_until(lambda: answers(port), timeout=30)
    return process


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def purge_test_queue() -> None:
    celery_app.control.purge()


def point_celery_at(broker_url: str) -> None:
    """Make this process publish to `broker_url` (the test queue's name stays)."""
    celery_app.conf.update(CELERY_BROKER_URL=broker_url)
    celery_app.close()
    celery_app.amqp.__dict__.pop("producer_pool", None)
    celery_app.amqp._producer_pool = None
