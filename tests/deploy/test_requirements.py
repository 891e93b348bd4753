"""The image installs requirements-runtime.txt only (Dockerfile): it must hold everything the
portal imports and everything those packages need, and with requirements-dev.txt it must be
exactly requirements.txt (one set of pins)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.rendering import ROOT

# Imports every module of the portal (not its tests, not kubesim: the image's kubesim stage
# adds what kubesim needs), then names the distributions that provide what got imported.
IMPORT_ALL = """
import json, pkgutil, sys, importlib, django
from importlib import metadata
django.setup()
import portal.wsgi, portal.celery
for package in ("claims", "portal"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
provided = metadata.packages_distributions()
tops = {name.split(".")[0] for name in list(sys.modules)}
print(json.dumps(sorted({d for top in tops for d in provided.get(top, [])})))
"""


# Imported when present, and never required: each importer falls back without it.
OPTIONAL = {
    "kubernetes-validate",  # kubernetes.dynamic's client validates with it when it can
    "importlib-resources",  # kubernetes-validate's own
    "greenlet",  # celery.utils.threads (eventlet/gevent pools; the image runs threads)
    "pygments",  # highlighting in a browsable API page, when installed
    "setuptools",  # the venv's own _distutils_hack at interpreter start
}


def pins(name: str) -> dict[str, str]:
    lines = (ROOT / name).read_text().splitlines()
    pairs = (line.split("==") for line in lines if "==" in line)
    return {canonicalize_name(package): version for package, version in pairs}


def runtime_top_level() -> list[Requirement]:
    text = (ROOT / "requirements.in").read_text().split("# Tests and tooling")[0]
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def needed(requirements: list[Requirement]) -> set[str]:
    """The distributions these need, transitively, with their extras, on this platform."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(r, tuple(sorted(r.extras))) for r in requirements]
    while todo:
        requirement, extras = todo.pop()
        key = (canonicalize_name(requirement.name), extras)
        if key in seen:
            continue
        seen.add(key)
        for raw in metadata.requires(requirement.name) or []:
            sub = Requirement(raw)
            wanted = any(
                sub.marker is None or sub.marker.evaluate({"extra": extra})
                for extra in extras or ("",)
            )
            if wanted:
                todo.append((sub, tuple(sorted(sub.extras))))
    return {name for name, _ in seen}


def test_it_splits_requirements_txt_in_two_without_changing_a_pin() -> None:
    runtime, dev, everything = (
        pins("requirements-runtime.txt"),
        pins("requirements-dev.txt"),
        pins("requirements.txt"),
    )
    assert not runtime.keys() & dev.keys()
    assert runtime | dev == everything
    assert (ROOT / "requirements-dev.txt").read_text().count("-r requirements-runtime.txt") == 1


def test_it_installs_what_the_runtime_requirements_need_and_nothing_for_tests() -> None:
    runtime = pins("requirements-runtime.txt")
    assert needed(runtime_top_level()) == set(runtime)
    for tool in ("pytest", "playwright", "mypy", "ruff", "kubernetes-validate", "hypothesis"):
        assert tool not in runtime


def test_it_holds_every_distribution_the_portal_imports() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    )
    imported = {canonicalize_name(name) for name in json.loads(result.stdout.splitlines()[-1])}
    assert imported, result.stderr
    assert imported - set(pins("requirements-runtime.txt")) - OPTIONAL == set()
