"""The kinds the gateway handles, their API paths, and the resource.k8s.io versions it prefers."""

from typing import Any
from urllib.parse import quote

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION_PREFERENCE = ("v1", "v1beta2", "v1beta1")

# kind -> (plural, namespaced)
KINDS = {
    "Namespace": ("namespaces", False),
    "Pod": ("pods", True),
    "ResourceClaim": ("resourceclaims", True),
    "DeviceClass": ("deviceclasses", False),
    "ResourceSlice": ("resourceslices", False),
    "ServiceAccount": ("serviceaccounts", True),
    "RoleBinding": ("rolebindings", True),
    "ResourceQuota": ("resourcequotas", True),
    "Job": ("jobs", True),
    "Service": ("services", True),
    "Ingress": ("ingresses", True),
    "DeviceTaintRule": ("devicetaintrules", False),
    "Workload": ("workloads", True),  # Kueue's, where the cluster runs it
    "LocalQueue": ("localqueues", True),
    "ClusterQueue": ("clusterqueues", False),
    "ConfigMap": ("configmaps", True),
}
RESOURCE_KINDS = ("ResourceClaim", "DeviceClass", "ResourceSlice")
# The apiVersion of the kinds outside resource.k8s.io and the core group (v1).
# DeviceTaintRule is served only in resource.k8s.io/v1alpha3 (1.33-1.35, alpha: off unless the
# cluster's runtime-config enables it); the portal reads it only where discovery lists that.
TAINT_RULE_VERSION = "v1alpha3"
# Kueue's API (a CRD, served where Kueue is installed) and its visibility API (an aggregated
# API server of Kueue's): the portal reads v1beta2, Kueue's storage version since v0.15.
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
GROUP_VERSIONS = {
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "Job": "batch/v1",
    "Ingress": "networking.k8s.io/v1",
    "DeviceTaintRule": f"{RESOURCE_GROUP}/{TAINT_RULE_VERSION}",
    "Workload": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
    "LocalQueue": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
    "ClusterQueue": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
}

Obj = dict[str, Any]


def _full_api_version(api_version: str, kind: str) -> str:
    if kind in RESOURCE_KINDS and "/" not in api_version:
        return f"{RESOURCE_GROUP}/{api_version}"
    return api_version


def _object_path(api_version: str, kind: str, namespace: str | None, name: str = "") -> str:
    if kind not in KINDS:
        raise ValueError(f"the gateway does not handle kind {kind!r}")
    plural, namespaced = KINDS[kind]
    api_version = _full_api_version(api_version, kind)
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    path = f"{base}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path
