"""Pod Security admission: the namespace's enforce label, or the cluster's default, and
upstream's words for what a Pod violates (k8s.io/pod-security-admission)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubesim
from claims.kube import manifests
from kubesim.cluster.topology import DEFAULT_PATH
from kubesim.registry.pod_security import violations
from tests.fixtures.kubesim import raw_request

PLAIN = {"name": "app", "image": "busybox"}


def namespace(handle: kubesim.Handle, labels: dict[str, str] | None = None) -> str:
    name = f"psa-{uuid.uuid4().hex[:6]}"
    handle.admin("POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})
    return name


def create_pod(handle: kubesim.Handle, ns: str, spec: dict[str, Any]) -> Any:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    return raw_request(handle, "POST", f"/api/v1/namespaces/{ns}/pods", body)


def test_a_restricted_namespace_refuses_a_plain_pod_in_upstreams_words(
    kubesim_private: kubesim.Handle,
) -> None:
    ns = namespace(kubesim_private, {"pod-security.kubernetes.io/enforce": "restricted"})
    response = create_pod(kubesim_private, ns, {"containers": [PLAIN]})
    assert response.status == 403
    status = response.json()
    assert (status["reason"], status["details"]) == ("Forbidden", {"name": "p", "kind": "pods"})
    assert status["message"] == (
        'pods "p" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "app" must set '
        "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
        '(container "app" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "app" must set '
        'securityContext.runAsNonRoot=true), seccompProfile (pod or container "app" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )


def test_the_level_comes_from_the_label_and_its_version_names_it(
    kubesim_private: kubesim.Handle,
) -> None:
    baseline = namespace(
        kubesim_private,
        {
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.34",
        },
    )
    assert create_pod(kubesim_private, baseline, {"containers": [PLAIN]}).status == 201
    privileged = {**PLAIN, "name": "root", "securityContext": {"privileged": True}}
    refused = create_pod(kubesim_private, baseline, {"containers": [privileged], "hostPID": True})
    assert refused.json()["message"] == (
        'pods "p" is forbidden: violates PodSecurity "baseline:v1.34": privileged (container '
        '"root" must not set securityContext.privileged=true), host namespaces (hostPID=true)'
    )
    unlabelled = namespace(kubesim_private)  # the default: privileged
    assert create_pod(kubesim_private, unlabelled, {"containers": [privileged]}).status == 201


def test_several_containers_are_named_together() -> None:
    spec = {"containers": [{"name": "a"}, {"name": "b"}], "securityContext": {"runAsNonRoot": True}}
    found = violations("restricted", spec)
    assert found[0] == (
        'allowPrivilegeEscalation != false (containers "a", "b" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    )
    assert not any(v.startswith("runAsNonRoot") for v in found)  # the Pod's setting covers all


@pytest.fixture
def restricted_by_default(tmp_path: Path) -> Iterator[kubesim.Handle]:
    topology = yaml.safe_load(DEFAULT_PATH.read_text()) | {
        "pod_security": {"enforce": "restricted"}
    }
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump(topology))
    handle = kubesim.start(topology=str(path), speed=20)
    yield handle
    handle.stop()


def test_a_cluster_may_enforce_restricted_everywhere_and_the_portals_pod_passes(
    restricted_by_default: kubesim.Handle,
) -> None:
    ns = namespace(restricted_by_default)
    assert create_pod(restricted_by_default, ns, {"containers": [PLAIN]}).status == 403
    pod = manifests.verification_pod_manifest(
        namespace=ns, name="verify", claim_name="train", labels={}
    )
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    restricted_by_default.admin("POST", path, claim)
    response = raw_request(restricted_by_default, "POST", f"/api/v1/namespaces/{ns}/pods", pod)
    assert response.status == 201, response.body
