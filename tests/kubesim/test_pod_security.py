"""Pod Security admission: the namespace's enforce, warn and audit labels, or the cluster's
defaults, and upstream's words for what a Pod violates (k8s.io/pod-security-admission)."""

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


RESTRICTED_WORDS = (
    'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
    '(container "app" must set securityContext.allowPrivilegeEscalation=false)'
)


def warnings_of(response: Any) -> list[str]:
    return response.headers.get_all("Warning") or []


def test_warn_admits_the_pod_and_says_what_it_would_violate(
    kubesim_private: kubesim.Handle,
) -> None:
    ns = namespace(
        kubesim_private,
        {
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/warn": "restricted",
        },
    )
    response = create_pod(kubesim_private, ns, {"containers": [PLAIN]})
    assert response.status == 201
    [warning] = warnings_of(response)
    assert warning.startswith('299 - "' + RESTRICTED_WORDS.replace('"', '\\"'))
    refused = create_pod(
        kubesim_private, ns, {"containers": [PLAIN], "hostNetwork": True}
    )  # refused by enforce: upstream adds no warning to a request it rejects
    assert refused.status == 403
    assert warnings_of(refused) == []


def test_audit_annotates_the_request_without_refusing_it(kubesim_private: kubesim.Handle) -> None:
    ns = namespace(kubesim_private, {"pod-security.kubernetes.io/audit": "restricted"})
    response = create_pod(kubesim_private, ns, {"containers": [PLAIN]})
    assert response.status == 201
    assert warnings_of(response) == []
    [event] = kubesim_private.api.pod_security_audit.of(ns)
    assert (event.resource, event.name) == ("pods", "p")
    assert event.annotations["pod-security.kubernetes.io/enforce-policy"] == "privileged:latest"
    assert event.annotations["pod-security.kubernetes.io/audit-violations"].startswith(
        RESTRICTED_WORDS
    )


def test_a_workload_is_warned_about_but_never_refused(kubesim_private: kubesim.Handle) -> None:
    ns = namespace(
        kubesim_private,
        {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
        },
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"containers": [PLAIN], "restartPolicy": "Never"}}},
    }
    response = raw_request(kubesim_private, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)
    assert response.status == 201, response.body
    [warning] = warnings_of(response)
    assert RESTRICTED_WORDS.replace('"', '\\"') in warning


def restricted_topology(tmp_path: Path, modes: dict[str, str]) -> Path:
    topology = yaml.safe_load(DEFAULT_PATH.read_text()) | {"pod_security": modes}
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump(topology))
    return path


@pytest.fixture
def restricted_by_default(tmp_path: Path) -> Iterator[kubesim.Handle]:
    path = restricted_topology(tmp_path, {"enforce": "restricted"})
    handle = kubesim.start(topology=str(path), speed=20)
    yield handle
    handle.stop()


def test_a_topology_sets_the_default_of_each_mode(tmp_path: Path) -> None:
    handle = kubesim.start(
        topology=str(restricted_topology(tmp_path, {"warn": "baseline", "audit": "restricted"})),
        speed=20,
    )
    try:
        ns = namespace(handle)
        privileged = {**PLAIN, "securityContext": {"privileged": True}}
        response = create_pod(handle, ns, {"containers": [privileged]})
        assert response.status == 201  # enforce stays privileged
        assert 'baseline:latest\\": privileged (container' in warnings_of(response)[0]
        [event] = handle.api.pod_security_audit.of(ns)
        assert (
            "restricted:latest" in event.annotations["pod-security.kubernetes.io/audit-violations"]
        )
    finally:
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
