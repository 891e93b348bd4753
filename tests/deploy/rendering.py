"""Render the kustomize overlays of deploy/ with the kubectl on this machine."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(path.name for path in (DEPLOY / "overlays").iterdir() if path.is_dir())
# Kinds that live outside a namespace: the rest are the portal's own, in its namespace.
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


@functools.cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    result = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def objects(overlay: str, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendered(overlay) if o["kind"] == kind}


def pod_templates(overlay: str) -> dict[str, dict[str, Any]]:
    """The Pod template of every Deployment and Job, by the workload's name."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]
        for o in rendered(overlay)
        if o["kind"] in ("Deployment", "Job")
    }
