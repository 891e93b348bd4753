"""The objects a Topology puts in the API server at start-up: its Nodes, each GPU node's
ResourceSlice and the driver chart's DeviceClasses (or the file's own `objects:`)."""

import copy
import hashlib
from typing import Any

from kubesim.cluster.hardware import (
    DEFAULT_K8S_VERSION,
    DEVICE_CLASS_CEL,
    DRIVER,
    GPU_EXTENDED_RESOURCE,
    Topology,
    stable_uuid,
)
from kubesim.kubelet.pod_status import node_ip


def _node_info(name: str, k8s_version: str) -> dict:
    machine = hashlib.sha256(name.encode()).hexdigest()
    return {
        "machineID": machine[:32],
        "systemUUID": stable_uuid("system", name),
        "bootID": stable_uuid("boot", name),
        "kernelVersion": "5.15.0-139-generic",
        "osImage": "Ubuntu 22.04.5 LTS",
        "containerRuntimeVersion": "containerd://1.7.27",
        "kubeletVersion": f"v{k8s_version.lstrip('v')}",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def node_object(topology: Topology, name: str, k8s_version: str = DEFAULT_K8S_VERSION) -> dict:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.present": "true",
        **topology.node_labels.get(name, {}),
    }
    status = {
        "capacity": {"cpu": "64", "memory": "528280508Ki", "pods": "110"},
        "allocatable": {"cpu": "63", "memory": "527178108Ki", "pods": "110"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": node_ip(name)},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": _node_info(name, k8s_version),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": status,
    }


def slice_object(topology: Topology, node: str, node_uid: str) -> dict:
    """The node's one ResourceSlice (storage form), named as the kubelet plugin names it."""
    suffix = hashlib.sha256(node.encode()).hexdigest()[:5]
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
    metadata = {
        "name": f"{node}-{DRIVER}-{suffix}",
        "generateName": f"{node}-{DRIVER}-",
        "ownerReferences": [owner],
    }
    spec = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [
            _with_taints(device.as_slice_device(), topology.device_taints.get(node, {}))
            for device in topology.devices_by_node[node]
        ],
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": spec,
    }


def _with_taints(device: dict, taints: dict[str, list[dict]]) -> dict:
    if taints.get(device["name"]):
        device["taints"] = [dict(taint) for taint in taints[device["name"]]]
    return device


def device_class_objects(
    topology: Topology, k8s_version: str = DEFAULT_K8S_VERSION, served: tuple[str, ...] = ("v1",)
) -> list[dict]:
    """The driver chart's DeviceClasses. Its HEAD chart renders them with resource.k8s.io/v1
    when served and then gives `gpu.nvidia.com` `extendedResourceName: nvidia.com/gpu`
    (templates/deviceclass-gpu.yaml); v1 is served from 1.34."""
    types = ["gpu", "mig"] if topology.has_mig() else ["gpu"]
    classes: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"{device_type}.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": DEVICE_CLASS_CEL.format(device_type)}}]},
        }
        for device_type in types
    ]
    if "v1" in served and int(k8s_version.lstrip("v").split(".")[1]) >= 34:
        classes[0]["spec"]["extendedResourceName"] = GPU_EXTENDED_RESOURCE
    return classes


def _as_created(obj: dict) -> dict:
    """An `objects:` entry as `kubectl create` leaves it: the API server's Node defaults
    (spec, daemonEndpoints) and the managedFields of manager kubectl-create."""
    from kubesim.registry.apply import record_update

    obj = copy.deepcopy(obj)
    record_update(
        None, obj, manager="kubectl-create", api_version=obj["apiVersion"], reset=("f:status",)
    )
    if obj["kind"] == "Node":
        obj.setdefault("spec", {})
        endpoints = obj.setdefault("status", {}).setdefault("daemonEndpoints", {})
        endpoints.setdefault("kubeletEndpoint", {"Port": 0})
    return obj


def seed(
    store: Any,
    topology: Topology,
    *,
    k8s_version: str = DEFAULT_K8S_VERSION,
    served_versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1"),
) -> None:
    """Create the Nodes, ResourceSlices and DeviceClasses of `topology` in an empty store;
    the kubelets report `k8s_version`."""
    from kubesim.registry.kinds import kind_for

    nodes, slices = kind_for("", "nodes"), kind_for("resource.k8s.io", "resourceslices")
    if topology.objects:
        for obj in topology.objects:
            resource = {"Node": "nodes", "ResourceSlice": "resourceslices"}.get(obj["kind"])
            group = "" if obj["kind"] == "Node" else "resource.k8s.io"
            store.create(kind_for(group, resource or "deviceclasses"), _as_created(obj))
        return
    for name in topology.node_names:
        node = store.create(nodes, node_object(topology, name, k8s_version))
        if topology.devices_by_node[name]:  # the driver runs on GPU nodes only
            published = slice_object(topology, name, node["metadata"]["uid"])
            slices.apply_defaults(published)  # the taints' timeAdded
            store.create(slices, published)
    for device_class in device_class_objects(topology, k8s_version, served_versions):
        store.create(kind_for("resource.k8s.io", "deviceclasses"), device_class)
