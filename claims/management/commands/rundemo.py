"""Run the whole product on this machine: kubesim, a Celery worker and beat, the cluster
follower, the web server.

A worker, beat or follower that dies is started again (after a back-off that grows while it keeps
dying); kubesim or the web server dying stops the demo. Ctrl-C (or SIGTERM, or the terminal
closing) stops every child, kubesim last. With KUBECONFIG set, that cluster is used instead of
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

PYTHON = sys.executable


# Children that are started again when they die; the others stop the demo.
RESTARTABLE = ("worker", "beat", "follower")
# Restart back-off: doubled after each quick death, reset once a child has stayed up a while.
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0
STABLE_SECONDS = 60.0


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    backoff: float = 0.0
    restart_at: float | None = None


class Children:
    """The subprocesses of the demo: a dead worker or beat is restarted, the rest stop together."""

    def __init__(self, say: Callable[[str], Any] = print) -> None:
        self.children: list[Child] = []
        self.say = say

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        env = env or os.environ.copy()
        self.children.append(Child(name, args, env, self.spawn(args, env)))

    def spawn(self, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        # A group of its own: the terminal's Ctrl-C reaches only the runner, which stops the
        # children in turn (stop). Reached by it too, kubesim went first and the follower,
        # still watching, filled the screen with "cannot reach the cluster" as the demo stopped.
        return subprocess.Popen(args, cwd=settings.BASE_DIR, env=env, process_group=0)

    def first_exited(self) -> str | None:
        return next((c.name for c in self.children if c.process.poll() is not None), None)

    def supervise(self) -> None:
        """Restart what is due; raise CommandError when a child that is not restarted died."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self.restart(child, now)
            elif child.process.poll() is not None:
                if child.name not in RESTARTABLE:
                    raise CommandError(f"{child.name} stopped unexpectedly; stopping the rest.")
                self.schedule_restart(child, now)

    def schedule_restart(self, child: Child, now: float) -> None:
        ran = now - child.started
        quick = ran < STABLE_SECONDS and child.backoff
        child.backoff = (
            min(child.backoff * 2, BACKOFF_MAX_SECONDS) if quick else BACKOFF_FIRST_SECONDS
        )
        child.restart_at = now + child.backoff
        self.say(
            f"{child.name} exited (code {child.process.returncode}) after {ran:.0f} s; "
            f"restarting it in {child.backoff:g} s."
        )

    def restart(self, child: Child, now: float) -> None:
        child.process = self.spawn(child.args, child.env)
        child.started, child.restart_at = now, None
        self.say(f"{child.name} restarted (pid {child.process.pid}).")

    def stop(self) -> None:
        """The portal's processes together, then the cluster they talk to: none is left to
        find it gone. A second Ctrl-C waits no more."""
        portal = [child for child in self.children if child.name != "kubesim"]
        cluster = [child for child in self.children if child.name == "kubesim"]
        try:
            for stage in (portal, cluster):
                stop_together([child.process for child in stage])
        except KeyboardInterrupt:
            for child in self.children:
                child.process.kill()
                child.process.wait()


def stop_together(processes: list[subprocess.Popen], timeout: float = 10) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
        self.seed_demo_users()
        children = Children(say=self.stdout.write)
        # Ctrl-C too, explicitly: started by a process that ignores SIGINT (nohup, a test
        # runner's worker), Python leaves it ignored, and the demo would not stop.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop_on_signal)
        try:
            self.start_cluster(children, options)
            self.start_workers(children)
            self.start_web(children, options["host"], options["port"])
            self.wait(children)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping...")
        finally:
            children.stop()

    def seed_demo_users(self) -> None:
        # Known passwords: only on a developer's machine, never in a deployment.
        if not settings.DEBUG:
            self.stdout.write("No demo logins: they are made only with DEBUG=True (make run).")
            return
        self.stdout.write("Demo logins:")
        call_command("seed_demo_users", stdout=self.stdout)

    def start_cluster(self, children: Children, options: dict[str, Any]) -> None:
        if settings.KUBECONFIG or settings.KUBE_IN_CLUSTER:
            self.stdout.write(f"Using the cluster of {settings.KUBECONFIG or 'this Pod'}.")
        else:
            kubeconfig = Path(settings.KUBESIM_KUBECONFIG)
            kubeconfig.unlink(missing_ok=True)
            exporters = settings.VAR_DIR / "kubesim-dcgm-exporters.txt"
            exporters.unlink(missing_ok=True)
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
                    "--dcgm-urls-file",
                    str(exporters),
                ],
            )
            wait_for_file(kubeconfig, children)
            wait_for_file(exporters, children)
            self.read_exporters(exporters)
            self.stdout.write(f"kubesim runs at speed {options['speed']:g} (--speed to change).")
        call_command("ensure_cluster", stdout=self.stdout)

    def read_exporters(self, path: Path) -> None:
        """Without a Prometheus the pages read kubesim's dcgm-exporters directly (current
        values only): the web and worker children get their URLs, unless set already."""
        if settings.PROMETHEUS_URL or settings.DCGM_EXPORTER_URLS:
            return
        urls = path.read_text().split()
        os.environ["DCGM_EXPORTER_URLS"] = ",".join(urls)
        self.stdout.write(f"GPU use: read from kubesim's dcgm-exporters ({len(urls)} nodes).")

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
        # The schedule file holds only when each periodic task last ran. A demo killed while
        # beat wrote it leaves one beat resets with a WARNING ("DB Reset"): start afresh.
        schedule = Path(settings.CELERY_BEAT_SCHEDULE_FILENAME)
        for stale in schedule.parent.glob(schedule.name + "*"):
            stale.unlink(missing_ok=True)
        children.start("beat", [*celery, "beat", "-l", "warning"])
        # One loop per cluster: it alone keeps the database current with the cluster.
        children.start("follower", [PYTHON, "manage.py", "follow_clusters"])

    def start_web(self, children: Children, host: str, port: int) -> None:
        children.start("web", [PYTHON, "manage.py", "runserver", f"{host}:{port}", "--noreload"])
        url = f"http://{host}:{port}/"
        wait_for_web(url + "accounts/login/", children)
        self.stdout.write(self.style.SUCCESS(f"\nThe portal is at {url}  (Ctrl-C stops it)\n"))

    def wait(self, children: Children) -> None:
        while True:
            children.supervise()
            time.sleep(0.5)
