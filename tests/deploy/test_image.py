"""The Dockerfile keeps the promises the manifests rely on (no Docker daemon in CI to build
it): the default target is the runtime stage, whose packages are requirements-runtime.txt's
alone, whose user is the numeric one the Pods run as, and whose static files and translations are
built in a stage of their own; the build context leaves tests and tooling out."""

from __future__ import annotations

import re

from tests.deploy.rendering import ROOT, pod_templates

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def stages() -> dict[str, str]:
    parts = re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0].split(" AS ")[-1].strip(): part for part in parts}


def test_it_builds_the_runtime_stage_by_default_from_runtime_requirements() -> None:
    found = stages()
    assert list(found)[-1] == "runtime"
    assert "pip install -r /tmp/requirements-runtime.txt" in found["builder"]
    for stage in ("assets", "runtime"):
        assert "requirements-dev" not in found[stage]
        assert "COPY --from=builder /opt/venv /opt/venv" in found[stage]
    assert "collectstatic --noinput" in found["assets"]
    assert "compilemessages" in found["assets"]
    # Built files only: no compiler, no gettext in what runs.
    assert "COPY --from=assets /app /app" in found["runtime"]
    assert "apt-get" not in found["runtime"]


def test_it_runs_as_the_numeric_user_the_pods_require() -> None:
    for name in ("runtime", "kubesim"):
        assert "\nUSER 10001\n" in stages()[name], name
    for template in pod_templates("production").values():
        assert template["spec"]["securityContext"]["runAsUser"] == 10001


def ignored() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_it_leaves_tests_and_tooling_out_of_the_build_context() -> None:
    for path in ("tests/", "docs/", "bench/", "deploy/", ".git/", ".venv/", "var/"):
        assert path in ignored()
    for path in ("test-artifacts/", ".hypothesis/", ".import_linter_cache/"):
        assert path in ignored()


def test_it_leaves_kubesim_to_its_own_image() -> None:
    # The kubesim stage copies it from the context; the portal's app tree goes without it.
    assert "kubesim/" not in ignored()
    assert "COPY kubesim/ kubesim/" in stages()["kubesim"]
    assert re.search(r"rm -rf [^\n]*\bkubesim\b", stages()["assets"])
    assert "kubesim" not in stages()["runtime"]
