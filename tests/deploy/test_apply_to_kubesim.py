"""The rendered overlays applied to kubesim with the real kubectl (`apply --server-side`), as
CI does: every object is accepted by an API server that validates them strictly, applying
again changes nothing, the ServiceAccount gets exactly what the ClusterRole says, and a
changed Job is refused (why an upgrade deletes the last release's migrations Job first)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest
import yaml

import kubesim
from tests.deploy.rendering import objects, rendered

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]
PORTAL = "system:serviceaccount:gpu-portal:gpu-portal"


@pytest.fixture(scope="module")
def cluster() -> Iterator[kubesim.Handle]:
    with kubesim.start(speed=20) as handle:
        yield handle


def kubectl(cluster: kubesim.Handle, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", cluster.kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def apply(cluster: kubesim.Handle, documents: list[dict]) -> subprocess.CompletedProcess:
    manifest = yaml.safe_dump_all(documents)
    return kubectl(
        cluster, "apply", "--server-side", "--field-manager", "gpu-portal-ci", "-f", "-",
        stdin=manifest,
    )  # fmt: skip


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_it_applies_every_object_of_the_overlay(cluster: kubesim.Handle, overlay: str) -> None:
    documents = list(rendered(overlay))
    # As an upgrade does (docs/operations.md): the last release's Job would refuse the change.
    kubectl(cluster, "-n", "gpu-portal", "delete", "job/gpu-portal-migrate", "--ignore-not-found")
    first = apply(cluster, documents)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert len(lines) == len(documents)
    assert all(line.endswith(" serverside-applied") for line in lines), first.stdout
    again = apply(cluster, documents)
    assert again.returncode == 0, again.stderr  # no conflict with itself
    for name, deployment in objects(overlay, "Deployment").items():
        stored = cluster.admin("GET", f"/apis/apps/v1/namespaces/gpu-portal/deployments/{name}")
        assert stored["spec"]["replicas"] == deployment["spec"]["replicas"]
        containers = stored["spec"]["template"]["spec"]["containers"]
        assert containers[0]["securityContext"]["readOnlyRootFilesystem"] is True
    service = cluster.admin("GET", "/api/v1/namespaces/gpu-portal/services/gpu-portal-web")
    assert service["spec"]["clusterIP"].startswith("10.")
    assert service["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("list", "resourceclaims.resource.k8s.io", "yes"),
        ("watch", "pods", "yes"),
        ("create", "serviceaccounts/token", "yes"),
        ("get", "secrets", "no"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", "no"),
        ("delete", "nodes", "no"),
    ],
)
def test_it_grants_the_service_account_the_role_and_no_more(
    cluster: kubesim.Handle, verb: str, resource: str, allowed: str
) -> None:
    identity = [d for d in rendered("dev") if d["kind"].startswith(("Namespace", "Cluster", "Ser"))]
    assert apply(cluster, identity).returncode == 0
    answer = kubectl(cluster, "auth", "can-i", verb, resource, "-A", "--as", PORTAL)
    assert answer.stdout.strip() == allowed, answer.stderr


def test_it_refuses_a_changed_job_template(cluster: kubesim.Handle) -> None:
    job = yaml.safe_load(yaml.safe_dump(objects("dev", "Job")["gpu-portal-migrate"]))
    kubectl(cluster, "-n", "gpu-portal", "delete", "job/gpu-portal-migrate", "--ignore-not-found")
    assert apply(cluster, [*objects("dev", "Namespace").values(), job]).returncode == 0
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "gpu-claims-portal:next"
    refused = apply(cluster, [job])
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'The Job "gpu-portal-migrate" is invalid: spec.template: Invalid value: field is immutable'
    )
    deleted = kubectl(cluster, "-n", "gpu-portal", "delete", "job", "gpu-portal-migrate")
    assert deleted.returncode == 0, deleted.stderr
    assert apply(cluster, [job]).returncode == 0


def test_it_refuses_a_deployment_whose_selector_misses_its_pods(cluster: kubesim.Handle) -> None:
    deployment = yaml.safe_load(yaml.safe_dump(objects("dev", "Deployment")["gpu-portal-web"]))
    deployment["metadata"]["name"] = "gpu-portal-stray"
    deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "other"
    refused = apply(cluster, [*objects("dev", "Namespace").values(), deployment])
    assert refused.returncode == 1
    assert "`selector` does not match template `labels`" in refused.stderr
