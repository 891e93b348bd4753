"""docker-compose.yml against the compose specification's JSON schema (the copy
check-jsonschema vendors, with its licence: `vendor.compose-spec`), and the same promises as
the manifests: the portal's processes run read-only with a tmpfs /tmp, without capabilities or
privilege escalation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.rendering import ROOT

COMPOSE = ROOT / "docker-compose.yml"


def check(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    return subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=120)


def services() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded["services"]


def test_it_is_valid_against_the_compose_specification() -> None:
    result = check(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_it_would_catch_a_mistake(tmp_path: Path) -> None:
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["web"]["restart"] = ["unless-stopped"]  # a string, not a list
    broken["services"]["worker"]["helthcheck"] = {}
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    result = check(path)
    assert result.returncode == 1
    assert "restart" in result.stdout and "helthcheck" in result.stdout


def test_it_runs_the_portal_read_only_from_its_image() -> None:
    ours = {name: s for name, s in services().items() if s["image"].startswith("gpu-claims")}
    assert set(ours) == {"kubesim", "web", "worker", "beat", "follower"}
    for name, service in ours.items():
        assert service["read_only"] is True, name
        assert service["tmpfs"] == ["/tmp"], name
        assert service["cap_drop"] == ["ALL"], name
        assert service["security_opt"] == ["no-new-privileges:true"], name
        target = "kubesim" if name == "kubesim" else "runtime"
        assert service["build"] == {"context": ".", "target": target}, name
    # The key comes from the environment of whoever starts it, never from this file.
    assert services()["web"]["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")
