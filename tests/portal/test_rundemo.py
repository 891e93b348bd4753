"""The runner of `make run`: a dead worker or beat comes back; the portal keeps running."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError

from claims.management.commands import rundemo
from tests.claims.management.test_commands import start_demo, wait_for_output
from tests.fixtures.kubesim import wait_until

# A child that stays up until it is stopped (SIGTERM/SIGKILL from the runner or the test).
SLEEPER = [sys.executable, "-c", "import threading; threading.Event().wait(60)"]
CRASHER = [sys.executable, "-c", "raise SystemExit(3)"]


class Said(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


def said(children: rundemo.Children) -> Said:
    return cast(Said, children.say)


def supervise_until(
    children: rundemo.Children, done: Callable[[], bool], timeout: float = 10
) -> None:
    def done_else_supervise() -> bool:
        if done():
            return True
        children.supervise()
        return False

    wait_until(done_else_supervise, timeout=timeout, interval=0.05)


@pytest.fixture
def children() -> Iterator[rundemo.Children]:
    supervised = rundemo.Children(say=Said())
    yield supervised
    supervised.stop()


def test_it_restarts_a_killed_worker_and_says_so(children: rundemo.Children) -> None:
    children.start("worker", SLEEPER)
    first = children.children[0].process
    first.kill()
    supervise_until(children, lambda: children.children[0].process is not first)
    assert children.children[0].process.poll() is None
    assert said(children)[0].startswith("worker exited (code -9)")
    assert said(children)[1].startswith("worker restarted (pid")


def test_it_backs_off_while_beat_keeps_dying(children: rundemo.Children) -> None:
    children.start("beat", CRASHER)
    lines = said(children)
    supervise_until(children, lambda: len(lines) >= 5)  # three deaths, 1 + 2 s apart
    waits = [line.split("restarting it in ")[1] for line in lines if "restarting" in line]
    assert waits == ["1 s.", "2 s.", "4 s."]


def test_it_stops_when_the_web_server_dies(children: rundemo.Children) -> None:
    children.start("web", CRASHER)
    children.children[0].process.wait()
    with pytest.raises(CommandError, match="web stopped unexpectedly"):
        children.supervise()


def child_pids(parent: int) -> dict[int, str]:
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found[int(stat.parent.name)] = (stat.parent / "cmdline").read_text()
        except (OSError, IndexError):
            continue
    return found


def worker_pid(demo: subprocess.Popen) -> int:
    workers = [pid for pid, cmd in child_pids(demo.pid).items() if "\0worker\0" in cmd]
    assert len(workers) == 1, child_pids(demo.pid)
    return workers[0]


def test_a_running_demo_brings_back_a_killed_worker(tmp_path: Path) -> None:
    demo, _, log = start_demo(tmp_path)
    try:
        wait_for_output(demo, log, "The portal is at", timeout=120)
        killed = worker_pid(demo)
        os.kill(killed, signal.SIGKILL)
        wait_for_output(demo, log, "worker restarted", timeout=20)
        assert "worker exited (code -9)" in log.read_text()
        assert worker_pid(demo) != killed
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=30)


def test_it_makes_no_demo_logins_without_debug(db: None, settings: Any) -> None:
    settings.DEBUG = False
    out = io.StringIO()
    rundemo.Command(stdout=out).seed_demo_users()
    assert "No demo logins" in out.getvalue()
    assert not User.objects.exists()
