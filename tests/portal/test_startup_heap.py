"""The long-running processes set aside what they loaded at start from the garbage collector
(portal/startup_heap.py): a full collection no longer walks Django, DRF, Celery and the
Kubernetes client's classes."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

FROZEN = "import gc; print(gc.get_freeze_count(), len(gc.get_objects()))"


def frozen_after(code: str) -> tuple[int, int]:
    """Objects set aside, and objects the collector still walks, after `code` ran."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DEBUG": "True"}
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\n{FROZEN}"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    frozen, walked = result.stdout.strip().splitlines()[-1].split()
    return int(frozen), int(walked)


def test_nothing_is_set_aside_by_merely_importing_django() -> None:
    assert frozen_after("import django; django.setup()")[0] == 0


def test_a_web_process_sets_aside_what_it_loaded_views_and_all() -> None:
    frozen, walked = frozen_after("import portal.wsgi")
    assert frozen > 100_000 and walked < frozen / 20


def test_a_worker_sets_aside_what_it_loaded_once_ready() -> None:
    code = "\n".join(
        ["from celery import signals", "import portal.celery", "signals.worker_ready.send(None)"]
    )
    frozen, walked = frozen_after(code)
    assert frozen > 50_000 and walked < frozen / 20
