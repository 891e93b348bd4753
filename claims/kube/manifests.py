"""Pure functions building the manifests the portal applies, as plain dicts."""

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from claims.kube import labels as label_keys

RESOURCE_GROUP = "resource.k8s.io"
RBAC_GROUP = "rbac.authorization.k8s.io"
RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1")
REQUEST_NAME = "gpu"
POD_CLAIM_NAME = "gpu"
MANAGED_BY_LABELS = label_keys.MANAGED_BY
VECTOR_ADD_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEVICE_QUERY_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:devicequery"
VERIFICATION_CONTAINERS = (("ctr0", VECTOR_ADD_IMAGE), ("ctr1", DEVICE_QUERY_IMAGE))

Manifest = dict[str, Any]


def resource_api_version(version: str) -> str:
    """Accept "v1" or "resource.k8s.io/v1" and return the full apiVersion."""
    short = version.removeprefix(f"{RESOURCE_GROUP}/")
    if short not in RESOURCE_VERSIONS:
        raise ValueError(f"unsupported resource.k8s.io version: {version!r}")
    return f"{RESOURCE_GROUP}/{short}"


def object_metadata(name: str, labels: dict[str, str], namespace: str | None = None) -> Manifest:
    metadata: Manifest = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = {**MANAGED_BY_LABELS, **labels}
    return metadata


def namespace_manifest(*, name: str, labels: dict[str, str]) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": object_metadata(name, labels)}


def _device_request_fields(
    device_class: str, count: int | None, all_devices: bool, selector: str
) -> Manifest:
    fields: Manifest = {"deviceClassName": device_class}
    if selector:
        fields["selectors"] = [{"cel": {"expression": selector}}]
    if all_devices:
        fields["allocationMode"] = "All"
    elif count is not None:
        fields["allocationMode"] = "ExactCount"
        fields["count"] = count
    return fields


# DRA's prioritized list takes at most this many subrequests (FirstAvailableDeviceRequestMaxSize).
MAX_ALTERNATIVES = 8


@dataclass(frozen=True)
class Alternative:
    """One entry of the request's prioritized list (`firstAvailable`): a subrequest."""

    name: str
    device_class: str
    count: int | None
    all_devices: bool = False
    selector: str = ""


def _first_available(alternatives: Sequence[Alternative]) -> list[Manifest]:
    return [
        {"name": alt.name}
        | _device_request_fields(alt.device_class, alt.count, alt.all_devices, alt.selector.strip())
        for alt in alternatives
    ]


def resource_claim_manifest(
    *,
    api_version: str,
    namespace: str,
    name: str,
    device_class: str,
    count: int | None,
    all_devices: bool = False,
    selector: str = "",
    labels: dict[str, str],
    alternatives: Sequence[Alternative] = (),
) -> Manifest:
    """A claim with one request named "gpu"; v1beta1 is flat, v1beta2 and v1 use `exactly`.
    With two or more `alternatives` the request is their prioritized list instead (the same
    `firstAvailable` shape in every version: the scheduler takes the first that fits)."""
    full_version = resource_api_version(api_version)
    fields = _device_request_fields(device_class, count, all_devices, selector.strip())
    request: Manifest
    if len(alternatives) > 1:
        request = {"name": REQUEST_NAME, "firstAvailable": _first_available(alternatives)}
    elif full_version.endswith("/v1beta1"):
        request = {"name": REQUEST_NAME, **fields}
    else:
        request = {"name": REQUEST_NAME, "exactly": fields}
    return {
        "apiVersion": full_version,
        "kind": "ResourceClaim",
        "metadata": object_metadata(name, labels, namespace),
        "spec": {"devices": {"requests": [request]}},
    }


# The quota resource of a device class (ResourceClaimsPerClass in k8s.io/api/core/v1), and
# what the API server's quota evaluator charges an allocationMode All request: the most
# devices one claim can get (resourceapi.AllocationResultsMaxSize), whatever the cluster has.
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
ALL_DEVICES_QUOTA_CHARGE = 32
RESOURCE_QUOTA_NAME = "gpu-portal-quota"


def device_class_quota_key(device_class: str) -> str:
    return f"{device_class}{DEVICE_CLASS_QUOTA_SUFFIX}"


def resource_quota_manifest(
    *, namespace: str, hard: dict[str, str], labels: dict[str, str]
) -> Manifest:
    """The namespace's ResourceQuota: `hard` maps quota keys (device_class_quota_key) to
    how many devices the namespace's ResourceClaims may ask for."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_metadata(RESOURCE_QUOTA_NAME, labels, namespace),
        "spec": {"hard": dict(sorted(hard.items()))},
    }


# What Pod Security "restricted" asks of every container, and of the Pod (many clusters enforce
# it on user namespaces). The CUDA samples need no root: a numeric user, as their images name
# none of their own and the kubelet can only check a number against runAsNonRoot.
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def claim_using_container(name: str, image: str) -> Manifest:
    return {
        "name": name,
        "image": image,
        "resources": {"claims": [{"name": POD_CLAIM_NAME}]},
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
    }


def verification_pod_manifest(
    *,
    namespace: str,
    name: str,
    claim_name: str,
    labels: dict[str, str],
    images: tuple[str, str] = (VECTOR_ADD_IMAGE, DEVICE_QUERY_IMAGE),
    image_pull_secret: str = "",
    active_deadline_seconds: int | None = None,
) -> Manifest:
    """The seed's pod1, with restartPolicy Never so that a failing sample fails the Pod."""
    names = [container for container, _ in VERIFICATION_CONTAINERS]
    spec: Manifest = {
        "restartPolicy": "Never",
        "securityContext": copy.deepcopy(POD_SECURITY),
        "resourceClaims": [{"name": POD_CLAIM_NAME, "resourceClaimName": claim_name}],
        "containers": [claim_using_container(n, i) for n, i in zip(names, images, strict=True)],
    }
    if image_pull_secret:
        spec["imagePullSecrets"] = [{"name": image_pull_secret}]
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": object_metadata(name, labels, namespace),
        "spec": spec,
    }


def service_account_manifest(*, namespace: str, name: str, labels: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_metadata(name, labels, namespace),
    }


def role_binding_manifest(
    *,
    namespace: str,
    name: str,
    cluster_role: str,
    subjects: list[dict[str, str]],
    labels: dict[str, str],
) -> Manifest:
    """Grants the ClusterRole's rules to the subjects within the namespace only."""
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_metadata(name, labels, namespace),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": cluster_role},
        "subjects": [dict(subject) for subject in subjects],
    }


def pod_spec_snippet(claim_name: str) -> Manifest:
    """The part of a Pod spec a user adds to their own workload to use the claim."""
    return {
        "spec": {
            "resourceClaims": [{"name": POD_CLAIM_NAME, "resourceClaimName": claim_name}],
            "containers": [
                {
                    "name": "my-container",
                    "image": "my-image",
                    "resources": {"claims": [{"name": POD_CLAIM_NAME}]},
                }
            ],
        }
    }


def to_yaml(manifest: Manifest) -> str:
    """YAML for display, keys in the order Kubernetes users expect (apiVersion, kind, ...)."""
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False)
