"""Other teams' workloads: what already runs on a shared cluster before anyone looks.

A topology's `workloads:` (docs/kubesim-topology.md) are made at start-up the way their team
would have made them, through the API as `kubectl create` sends them: a Namespace, a
ResourceClaim for `gpus` devices of a class, and a Pod that uses the claim and runs until
deleted (`sleep infinity`). The scheduler allocates the claim and reserves it for the Pod,
and the kubelet runs it, exactly as for any other Pod: nothing here writes a status.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from email.message import Message
from typing import Any

from kubesim.auth.authentication import ADMIN
from kubesim.base.http import Request
from kubesim.registry.kinds import kind_for

START_SECONDS = 10.0  # wall-clock: how long start-up waits for a workload to hold its devices
IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:devicequery"
FIELD_MANAGER = "kubectl-create"


class WorkloadError(ValueError):
    """A `workloads:` entry that cannot describe a workload."""


@dataclass(frozen=True)
class Workload:
    namespace: str
    name: str
    gpus: int = 1
    device_class: str = "gpu.nvidia.com"
    node: str = ""  # pinned by a nodeSelector on kubernetes.io/hostname; "" = any node
    image: str = IMAGE
    # Asked the device-plugin way (`nvidia.com/gpu: 2` in the container's limits) instead of
    # by a claim: the scheduler makes the claim (a DeviceClass's extendedResourceName).
    extended_resource: str = ""

    def manifests(self, version: str) -> list[tuple[str, dict[str, Any]]]:
        """(collection path, object) in the order they are created; the claim in `version`
        of resource.k8s.io."""
        namespaced = f"/namespaces/{self.namespace}"
        claims = f"/apis/resource.k8s.io/{version}{namespaced}/resourceclaims"
        return [
            ("/api/v1/namespaces", _namespace(self.namespace)),
            *([] if self.extended_resource else [(claims, self.claim(version))]),
            (f"/api/v1{namespaced}/pods", self.pod()),
        ]

    def claim(self, version: str = "v1") -> dict[str, Any]:
        wanted = {"deviceClassName": self.device_class, "count": self.gpus}
        # v1beta1 has the request's fields inline; v1beta2 and v1 under `exactly`.
        request = {"name": "gpus", **({"exactly": wanted} if version != "v1beta1" else wanted)}
        return {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "ResourceClaim",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"devices": {"requests": [request]}},
        }

    def pod(self) -> dict[str, Any]:
        container = {
            "name": "train",
            "image": self.image,
            "command": ["sleep", "infinity"],
            "resources": self._resources(),
            # Pod Security "restricted": it runs where a cluster enforces that everywhere.
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
        spec: dict[str, Any] = {"containers": [container]}
        if not self.extended_resource:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": self.name}]
        if self.node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": self.node}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }

    def _resources(self) -> dict[str, Any]:
        if self.extended_resource:
            return {"limits": {self.extended_resource: str(self.gpus)}}
        return {"claims": [{"name": "gpus"}]}


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def from_list(entries: Any, nodes: list[str]) -> list[Workload]:
    """The `workloads:` section."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise WorkloadError("`workloads:` must be a list")
    known = {"namespace", "name", "gpus", "deviceClass", "node", "image", "extendedResource"}
    workloads = []
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) - known:
            raise WorkloadError(f"a workload has the keys {sorted(known)}: {entry!r}")
        if not entry.get("namespace") or not entry.get("name"):
            raise WorkloadError(f"a workload needs a `namespace` and a `name`: {entry!r}")
        gpus = entry.get("gpus", 1)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            raise WorkloadError(f"workload {entry['name']}: `gpus` must be a whole number >= 1")
        node = str(entry.get("node") or "")
        if node and node not in nodes:
            raise WorkloadError(f"workload {entry['name']}: no node {node!r} in `nodes:`")
        workloads.append(
            Workload(
                namespace=str(entry["namespace"]),
                name=str(entry["name"]),
                gpus=gpus,
                device_class=str(entry.get("deviceClass") or "gpu.nvidia.com"),
                node=node,
                image=str(entry.get("image") or IMAGE),
                extended_resource=str(entry.get("extendedResource") or ""),
            )
        )
    return workloads


def _create(api: Any, path: str, obj: dict[str, Any]) -> None:
    """POST through the API server's own handlers, as kubectl create as cluster admin."""
    headers = Message()
    headers["Content-Type"] = "application/json"
    headers["User-Agent"] = "kubectl/v1.34.1 (linux/amd64) kubernetes/93248f9"
    query = {"fieldManager": FIELD_MANAGER}
    request = Request("POST", path, query, headers, json.dumps(obj).encode(), ADMIN)
    response = api(request)
    if getattr(response, "status", 201) >= 300:
        raise WorkloadError(f"creating {path}/{obj['metadata']['name']}: {response.body!r}")


def start(api: Any, workloads: list[Workload]) -> None:
    """Create the workloads and wait (START_SECONDS at most) until each claim is reserved for
    its Pod, so a client that connects finds their devices held."""
    version = next(v for v in ("v1", "v1beta2", "v1beta1") if v in api.served_versions)
    for workload in workloads:
        for path, obj in workload.manifests(version):
            if obj["kind"] == "Pod":
                _wait_for(lambda w=workload: _default_service_account(api, w.namespace))
            _create(api, path, obj)
    for workload in workloads:
        _wait_for(lambda w=workload: _reserved(api, w))


def _wait_for(check: Any) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)


def _default_service_account(api: Any, namespace: str) -> bool:
    """A Pod needs its ServiceAccount; a new namespace gets `default` from the controller."""
    return api.store.exists(kind_for("", "serviceaccounts"), namespace, "default")


def _reserved(api: Any, workload: Workload) -> bool:
    claims = kind_for("resource.k8s.io", "resourceclaims")
    name = workload.name
    if workload.extended_resource:
        pods = kind_for("", "pods")
        if not api.store.exists(pods, workload.namespace, workload.name):
            return False
        pod = api.store.get(pods, workload.namespace, workload.name)
        status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        name = status.get("resourceClaimName") or ""
    if not name or not api.store.exists(claims, workload.namespace, name):
        return False
    claim = api.store.get(claims, workload.namespace, name)
    return bool((claim.get("status") or {}).get("reservedFor"))
