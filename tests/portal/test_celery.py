"""The broker a checkout uses with no REDIS_URL: a SQLite file under var/broker."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.portal import _test_database_url

ROOT = Path(__file__).resolve().parents[2]
TASKS = 40
SEND = f"""
import django
django.setup()
from portal.celery import app
for _ in range({TASKS}):
    app.send_task("claims.worker.tasks.reconcile")
"""


def default_broker_env(var_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if "BROKER" not in key}
    return env | {
        "PORTAL_VAR_DIR": str(var_dir),
        "REDIS_URL": "",
        "DATABASE_URL": _test_database_url(),
        "PYTHONPATH": str(ROOT),
    }


def succeeded(log: Path) -> int:
    return log.read_text(errors="replace").count("succeeded in")


@pytest.mark.django_db
def test_it_passes_many_tasks_through_a_real_worker_on_the_default_broker(
    tmp_path: Path,
) -> None:
    var_dir, cwd, log = tmp_path / "var", tmp_path / "cwd", tmp_path / "worker.log"
    cwd.mkdir()
    env = default_broker_env(var_dir)
    command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "info"]
    with log.open("w") as out:
        worker = subprocess.Popen(
            [*command, "-P", "threads", "-c", "4"], cwd=cwd, env=env, stdout=out, stderr=out
        )
    try:
        # Sent while the worker starts and reads: writer and readers meet in the file.
        subprocess.run([sys.executable, "-c", SEND], cwd=cwd, env=env, check=True)
        deadline = time.monotonic() + 60
        while succeeded(log) < TASKS and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()
            time.sleep(0.2)
    finally:
        worker.kill()  # the work is done or the test failed: no need to wait for a shutdown
        worker.wait()
    printed = log.read_text(errors="replace")
    assert succeeded(log) == TASKS, printed
    assert "Traceback" not in printed and "ERROR" not in printed, printed
    assert list(cwd.iterdir()) == []  # nothing (like kombu's control/) beside the worker
    assert (var_dir / "broker" / "broker.sqlite3").exists()


DECLARE = """
import sys
from kombu import Connection
from portal.celery import SQLiteBroker
options = {{"connect_args": {{"timeout": 30}}}}
print("ready", flush=True)
sys.stdin.readline()  # all start at once: the first to open the file create its tables
with Connection(sys.argv[1], transport=SQLiteBroker, transport_options=options) as connection:
    channel = connection.default_channel
    for index in range({queues}):
        channel.queue_declare(f"queue-{{index}}")
"""


def test_processes_declaring_the_same_queues_at_once_on_the_default_broker_all_go_on(
    tmp_path: Path,
) -> None:
    """kombu looks, then creates, under a lock of its own process: two processes opening a new
    broker file at once (the web's first task, the worker starting) met on its tables, and two
    declaring one queue at once on the row's unique name; the loser stopped."""
    queues, url = 60, f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    script = DECLARE.format(queues=queues)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "portal.settings"}
    declarers = [
        subprocess.Popen(
            [sys.executable, "-c", script, url],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(6)
    ]
    for declarer in declarers:
        assert declarer.stdout.readline() == "ready\n"
    for declarer in declarers:
        declarer.stdin.write("go\n")
        declarer.stdin.close()
    outcomes = [(declarer.wait(timeout=120), declarer.stdout.read()) for declarer in declarers]
    assert all(code == 0 for code, _ in outcomes), outcomes
    with sqlite3.connect(tmp_path / "broker.sqlite3") as database:
        names = [name for (name,) in database.execute("SELECT name FROM kombu_queue")]
    assert sorted(names) == sorted(f"queue-{index}" for index in range(queues))
