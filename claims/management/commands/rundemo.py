"""Run the whole product on this machine: kubesim, a Celery worker and beat, the web server.

Ctrl-C (or SIGTERM) stops every child. With KUBECONFIG set, that cluster is used instead of
starting kubesim.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

PYTHON = sys.executable


class Children:
    """The subprocesses of the demo, stopped together in reverse order."""

    def __init__(self) -> None:
        self.processes: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        process = subprocess.Popen(args, cwd=settings.BASE_DIR, env=env or os.environ.copy())
        self.processes.append((name, process))

    def first_exited(self) -> str | None:
        return next((name for name, p in self.processes if p.poll() is not None), None)

    def stop(self) -> None:
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for _, process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def stop_on_signal(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def wait_for_file(path: Path, children: Children, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if children.first_exited() or time.monotonic() > deadline:
            raise CommandError(f"kubesim did not write {path}")
        time.sleep(0.1)


def wait_for_web(url: str, children: Children, timeout: float = 60) -> None:
    """Return once the web server answers, so the URL printed next works at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answered, even if not with 200
        except OSError:
            if children.first_exited() or time.monotonic() > deadline:
                raise CommandError(f"the web server did not answer at {url}") from None
            time.sleep(0.2)


class Command(BaseCommand):
    help = "Start kubesim (unless KUBECONFIG is set), a Celery worker and beat, and the web server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.getenv("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("PORT", "8000")))
        parser.add_argument("--kubesim-port", type=int, default=0, help="0 = any free port")
        parser.add_argument(
            "--speed",
            type=float,
            default=settings.KUBESIM_SPEED,
            help="kubesim's pace (default KUBESIM_SPEED, else 1: a run takes ~5 s to watch)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Demo logins:")
        call_command("seed_demo_users", stdout=self.stdout)
        children = Children()
        signal.signal(signal.SIGTERM, stop_on_signal)
        try:
            self.start_cluster(children, options)
            self.start_workers(children)
            self.start_web(children, options["host"], options["port"])
            self.wait(children)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping...")
        finally:
            children.stop()

    def start_cluster(self, children: Children, options: dict[str, Any]) -> None:
        if settings.KUBECONFIG or settings.KUBE_IN_CLUSTER:
            self.stdout.write(f"Using the cluster of {settings.KUBECONFIG or 'this Pod'}.")
        else:
            kubeconfig = Path(settings.KUBESIM_KUBECONFIG)
            kubeconfig.unlink(missing_ok=True)
            children.start(
                "kubesim",
                [
                    PYTHON,
                    "-m",
                    "kubesim",
                    "serve",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--port",
                    str(options["kubesim_port"]),
                    "--speed",
                    str(options["speed"]),
                    "--state",
                    str(settings.VAR_DIR / "kubesim-state.json"),
                ],
            )
            wait_for_file(kubeconfig, children)
            self.stdout.write(f"kubesim runs at speed {options['speed']:g} (--speed to change).")
        call_command("ensure_cluster", stdout=self.stdout)

    def start_workers(self, children: Children) -> None:
        celery = [PYTHON, "-m", "celery", "-A", "portal"]
        children.start(
            "worker",
            [
                *celery,
                "worker",
                "-l",
                "warning",
                "-P",
                "threads",
                "-c",
                "4",
                "-Q",
                settings.CELERY_TASK_DEFAULT_QUEUE,
            ],
        )
        children.start("beat", [*celery, "beat", "-l", "warning"])

    def start_web(self, children: Children, host: str, port: int) -> None:
        children.start("web", [PYTHON, "manage.py", "runserver", f"{host}:{port}", "--noreload"])
        url = f"http://{host}:{port}/"
        wait_for_web(url + "accounts/login/", children)
        self.stdout.write(self.style.SUCCESS(f"\nThe portal is at {url}  (Ctrl-C stops it)\n"))

    def wait(self, children: Children) -> None:
        while True:
            exited = children.first_exited()
            if exited:
                raise CommandError(f"{exited} stopped unexpectedly; stopping the rest.")
            time.sleep(0.5)
