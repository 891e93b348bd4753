"""The migrations Job's own command, run as the manifests run it: with the ConfigMap's
settings (KUBE_IN_CLUSTER=True) and a Pod's in-cluster credentials (the ServiceAccount's
token and the cluster's CA where the kubelet mounts them, KUBERNETES_SERVICE_HOST/PORT), the
portal migrates, then registers the cluster it runs in and reads its inventory with exactly
the ClusterRole of deploy/; the other Pods' wait-for-migrations check then passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

import kubesim
from claims.models import Cluster
from tests.deploy.rendering import objects, pod_templates, rendered
from tests.fixtures.portal import _test_database_url

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]
TOKEN_PATH = "/api/v1/namespaces/gpu-portal/serviceaccounts/gpu-portal/token"


@pytest.fixture
def cluster() -> Iterator[kubesim.Handle]:
    with kubesim.start(speed=20) as handle:
        yield handle


def service_account_files(handle: kubesim.Handle, directory: Path) -> Path:
    """The deploy/ identity applied, and its files as the kubelet projects them."""
    identity = [d for d in rendered("dev") if d["kind"].startswith(("Namespace", "Cluster", "Ser"))]
    applied = subprocess.run(
        ["kubectl", "--kubeconfig", handle.kubeconfig, "apply", "--server-side", "-f", "-"],
        input=yaml.safe_dump_all(identity), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = handle.admin("POST", TOKEN_PATH, request)["status"]["token"]
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(handle.ca_pem)
    return directory


def pod_environment(handle: kubesim.Handle, account: Path) -> dict[str, str]:
    config = next(iter(objects("dev", "ConfigMap").values()))["data"]
    url = urlsplit(handle.url)
    secrets = {
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": os.environ.get("REDIS_URL", ""),
    }
    return {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **config,
        **secrets,
        "KUBERNETES_SERVICE_HOST": str(url.hostname),
        "KUBERNETES_SERVICE_PORT": str(url.port),
        "KUBE_SERVICE_ACCOUNT_DIR": str(account),
        "PORTAL_VAR_DIR": str(account.parent / "var"),
    }


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=300)


def test_the_migrations_job_registers_the_cluster_it_runs_in(
    transactional_db: None, cluster: kubesim.Handle, tmp_path: Path
) -> None:
    env = pod_environment(cluster, service_account_files(cluster, tmp_path / "serviceaccount"))
    job = pod_templates("dev")["gpu-portal-migrate"]["spec"]["containers"][0]
    result = run(job["command"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cluster default: Kubernetes v1.34" in result.stdout
    registered = Cluster.objects.get(name="default")
    assert (registered.in_cluster, registered.kubeconfig_path) == (True, "")
    assert registered.inventory["device_counts"]
    waiting = pod_templates("dev")["gpu-portal-web"]["spec"]["initContainers"][0]
    assert run(waiting["command"], env).returncode == 0  # the schema is current: Pods start
