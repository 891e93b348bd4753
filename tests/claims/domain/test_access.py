"""Access end to end: a real Celery worker grants it, the owner downloads a kubeconfig, and the
real kubectl works in her namespace and nowhere else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

import kubesim
from claims.domain import services
from claims.models import Cluster, NamespaceRequest
from tests.fixtures.kubesim import create_namespace
from tests.fixtures.portal import pods_in, state_of, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_beat_process"),
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]
Kubectl = Callable[..., subprocess.CompletedProcess]
# As a user must write it where the portal's namespaces enforce Pod Security "restricted"
# (NAMESPACE_POD_SECURITY, the default).
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: notebook
spec:
  restartPolicy: Never
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile: {type: RuntimeDefault}
  containers:
    - name: main
      image: python:3.12-slim
      command: ["python", "-c", "print('hello')"]
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {drop: [ALL]}
"""


def restricted(container: str) -> list[str]:
    """kubectl run's flags for a Pod that passes Pod Security "restricted"."""
    overrides = {
        "spec": {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": container,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        }
    }
    return ["--override-type=strategic", f"--overrides={json.dumps(overrides)}"]


def active_with_access(alice: User, carol: User, cluster: Cluster) -> NamespaceRequest:
    name = f"ds-{uuid.uuid4().hex[:6]}"
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name=name)
    services.namespace_request_approve(user=carol, namespace_request=ns)
    wait_until(lambda: state_of(ns) == "active")
    wait_until(lambda: NamespaceRequest.objects.get(pk=ns.pk).access_granted_at, timeout=15)
    ns.refresh_from_db()
    return ns


def kubectl_with(kubeconfig: Path, home: Path) -> Kubectl:
    """kubectl with only the downloaded kubeconfig, a private HOME and discovery cache."""
    env = {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
    env.pop("KUBECONFIG", None)

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        command = ["kubectl", "--kubeconfig", str(kubeconfig), *args]
        return subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=env, timeout=60
        )

    return run


def downloaded_from_the_page(owner: User, ns: NamespaceRequest, folder: Path) -> Path:
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("namespace", args=[ns.pk])).content.decode()
    assert "Download kubeconfig" in page
    response = client.post(reverse("namespace-kubeconfig", args=[ns.pk]))
    assert response.status_code == 200, response.content
    path = folder / f"{ns.cluster.name}-{ns.name}.kubeconfig"
    path.write_bytes(response.content)
    return path


def downloaded_through_the_api(owner: User, ns: NamespaceRequest, folder: Path) -> Path:
    client = APIClient()
    token = AuthToken.objects.create(user=owner, expiry=None)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.post(f"/api/v1/namespace-requests/{ns.pk}/kubeconfig/")
    assert response.status_code == 200, response.content
    path = folder / "api.kubeconfig"
    path.write_bytes(response.content)
    return path


def test_it_lets_the_owner_use_kubectl_in_her_namespace_only(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: kubesim.Handle, tmp_path: Path
) -> None:
    ns = active_with_access(alice, carol, cluster)
    kubectl = kubectl_with(downloaded_from_the_page(alice, ns, tmp_path), tmp_path)
    identity = f"system:serviceaccount:{ns.name}:gpu-portal-alice"

    created = kubectl("create", "-f", "-", stdin=POD)
    assert created.returncode == 0, created.stderr
    assert "pod/notebook created" in created.stdout
    ran = kubectl(
        "run", "shell", "--image=busybox", "--restart=Never", *restricted("shell"), "--", "true"
    )
    assert ran.returncode == 0, ran.stderr
    assert {"notebook", "shell"} <= set(pods_in(kubesim_cluster, ns.name))
    assert kubectl("get", "resourceclaims").returncode == 0

    elsewhere = create_namespace(kubesim_cluster, prefix="other")
    refused = kubectl("-n", elsewhere, "create", "-f", "-", stdin=POD)
    assert refused.returncode != 0
    assert "Forbidden" in refused.stderr and identity in refused.stderr
    assert pods_in(kubesim_cluster, elsewhere) == []

    nodes = kubectl("get", "nodes")
    assert nodes.returncode != 0
    assert "Forbidden" in nodes.stderr and identity in nodes.stderr


def test_it_gives_the_same_access_through_the_api(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: kubesim.Handle, tmp_path: Path
) -> None:
    ns = active_with_access(alice, carol, cluster)
    path = downloaded_through_the_api(alice, ns, tmp_path)
    config = yaml.safe_load(path.read_text())
    assert config["contexts"][0]["context"]["namespace"] == ns.name
    kubectl = kubectl_with(path, tmp_path)
    ran = kubectl(
        "run",
        "api-shell",
        "--image=busybox",
        "--restart=Never",
        *restricted("api-shell"),
        "--",
        "true",
    )
    assert ran.returncode == 0, ran.stderr
    assert "api-shell" in pods_in(kubesim_cluster, ns.name)
