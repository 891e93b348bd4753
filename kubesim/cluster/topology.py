"""The simulated cluster's hardware: nodes, their GPUs, and the objects that publish them.

`load(path)` reads a YAML topology (docs/kubesim-topology.md); `load(None)` is the default:
two nodes, 4 x H100 80GB HBM3 and 4 x A100-SXM4-40GB, as the NVIDIA DRA driver (v25.8
style) publishes them.
"""

import copy
import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesim.cluster.workloads import Workload, WorkloadError
from kubesim.cluster.workloads import from_list as workloads_from_list
from kubesim.kubelet.cuda import MIG_PROFILES, MODELS, GpuModel, MigProfile
from kubesim.kubelet.images import Registry
from kubesim.kubelet.images import parse as parse_image
from kubesim.kubelet.pod_status import node_ip

DRIVER = "gpu.nvidia.com"
DEFAULT_PATH = Path(__file__).parent / "topologies" / "default.yaml"
DEFAULT_K8S_VERSION = "1.34.1"
DEFAULT_IMAGES = (
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
    "nvcr.io/nvidia/k8s/cuda-sample:devicequery",
    "nvcr.io/nvidia/k8s/cuda-sample:devicequery-cuda12.5.0",
    # the portal's seeded batch profile (a plain CUDA base image: nvidia-smi)
    "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
    # kubesim's training-like image and Jupyter's CUDA images (kubelet/programs.py)
    "ghcr.io/gpu-portal/train-sim:1.0",
    "quay.io/jupyter/pytorch-notebook:cuda12-latest",
    "quay.io/jupyter/pytorch-notebook:cuda12-python-3.12",
    "quay.io/jupyter/base-notebook:latest",
    "busybox:1.36",
)
# An image's first pull on a node, in simulated seconds: a real pull of a CUDA sample image
# takes tens of seconds; a few keep `make run` (speed 1) pleasant and still show the pull.
DEFAULT_PULL_SECONDS = 3.0
GPU_EXTENDED_RESOURCE = "nvidia.com/gpu"
DEVICE_CLASS_CEL = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"
)


class TopologyError(ValueError):
    """A topology file that cannot describe a cluster."""


@dataclass(frozen=True)
class Device:
    node: str
    name: str
    minor: int
    uuid: str
    model: GpuModel
    pci_bus_id: str
    driver_version: str
    cuda_driver_version: str
    mig: MigProfile | None = None
    parent_uuid: str = ""
    mig_start: int = 0

    @property
    def product_name(self) -> str:
        return self.model.product_name

    @property
    def multiprocessors(self) -> int:
        return self.mig.multiprocessors if self.mig else self.model.multiprocessors

    @property
    def cuda_memory_bytes(self) -> int:
        if self.mig:
            return self.mig.memory_mib * 2**20 - 2**29
        return self.model.cuda_memory_bytes

    def attributes(self) -> dict[str, dict]:
        attributes = {
            "architecture": {"string": self.model.architecture},
            "brand": {"string": self.model.brand},
            "cudaComputeCapability": {"version": self.model.compute_capability},
            "cudaDriverVersion": {"version": self.cuda_driver_version},
            "driverVersion": {"version": self.driver_version},
            "pcieBusID": {"string": self.pci_bus_id},
            "productName": {"string": self.product_name},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{self.pci_bus_id[5:7]}"},
            "type": {"string": "mig" if self.mig else "gpu"},
            "uuid": {"string": self.uuid},
        }
        if self.mig:
            attributes["parentUUID"] = {"string": self.parent_uuid}
            attributes["profile"] = {"string": self.mig.name}
        return attributes

    def capacity(self) -> dict[str, dict]:
        if not self.mig:
            return {"memory": {"value": self.model.memory}}
        capacity = {
            "multiprocessors": {"value": str(self.mig.multiprocessors)},
            "copyEngines": {"value": str(max(1, self.mig.slices - 1))},
            "decoders": {"value": str(self.mig.slices // 2)},
            "encoders": {"value": "0"},
            "jpegEngines": {"value": str(min(1, self.mig.slices // 4))},
            "ofaEngines": {"value": str(min(1, self.mig.slices // 8))},
            "memory": {"value": f"{self.mig.memory_mib}Mi"},
        }
        for index in range(self.mig_start, self.mig_start + self.mig.slices):
            capacity[f"memorySlice{index}"] = {"value": "1"}
        return capacity

    def as_slice_device(self) -> dict:
        return {"name": self.name, "attributes": self.attributes(), "capacity": self.capacity()}


@dataclass
class Topology:
    devices_by_node: dict[str, list[Device]]
    images: tuple[str, ...] = DEFAULT_IMAGES
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    registries: dict[str, Registry] = field(default_factory=dict)
    offline: bool = False  # only the `registries` can be reached
    objects: list[dict] = field(default_factory=list)  # verbatim Nodes, slices, classes
    # Pod Security's levels where a namespace has no label of its own (`pod_security:
    # {enforce:, warn:, audit:}`; upstream's default, without an AdmissionConfiguration, is
    # privileged for each mode).
    pod_security: dict[str, str] = field(default_factory=dict)
    image_pull_seconds: float = DEFAULT_PULL_SECONDS  # for images without their own
    pull_seconds: dict[str, float] = field(default_factory=dict)  # normalised image -> seconds
    image_sizes: dict[str, int] = field(default_factory=dict)  # normalised image -> bytes
    # Other teams' Pods and claims, made at start-up (kubesim/cluster/workloads.py).
    workloads: list[Workload] = field(default_factory=list)
    # node -> device -> the taints its driver publishes on it (`deviceTaints:`).
    device_taints: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    kueue: dict | None = None  # `kueue: {visibility: true}`: serve Kueue's API groups

    @property
    def node_names(self) -> list[str]:
        return list(self.devices_by_node)

    def devices(self) -> list[Device]:
        return [device for devices in self.devices_by_node.values() for device in devices]

    def device(self, pool: str, name: str) -> Device | None:
        for device in self.devices_by_node.get(pool, []):
            if device.name == name:
                return device
        return None

    def image_pull_seconds_of(self, image: str) -> float:
        """How long a first pull of `image` takes on a node (simulated seconds)."""
        return self.pull_seconds.get(parse_image(image).full, self.image_pull_seconds)

    def has_mig(self) -> bool:
        return any(device.mig for device in self.devices())


def _stable_uuid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kubesim/" + "/".join(parts)))


def _gpu_devices(
    node: str, spec: dict, first_minor: int, versions: tuple[str, str]
) -> list[Device]:
    model_name = spec.get("model", "")
    if model_name not in MODELS:
        raise TopologyError(
            f"node {node}: unknown GPU model {model_name!r}; known: {sorted(MODELS)}"
        )
    model = MODELS[model_name]
    devices = []
    for offset in range(int(spec.get("count", 1))):
        minor = first_minor + offset
        gpu_uuid = "GPU-" + _stable_uuid(node, str(minor), model.product_name)
        bus = f"0000:{0x18 + 0x10 * minor:02x}:00.0"
        profiles = spec.get("mig") or []
        if not profiles:
            devices.append(Device(node, f"gpu-{minor}", minor, gpu_uuid, model, bus, *versions))
            continue
        devices += _mig_devices(node, minor, gpu_uuid, model, bus, profiles, versions)
    return devices


def _mig_devices(
    node: str,
    minor: int,
    parent_uuid: str,
    model: GpuModel,
    bus: str,
    profiles: list[str],
    versions: tuple[str, str],
) -> list[Device]:
    devices, start = [], 0
    for profile_name in profiles:
        profile = MIG_PROFILES.get((model.product_name, profile_name))
        if profile is None:
            raise TopologyError(
                f"node {node}: MIG profile {profile_name!r} unknown for {model.product_name}"
            )
        name = f"gpu-{minor}-mig-{profile.gi_profile_id}-{start}-{profile.slices}"
        mig_uuid = "MIG-" + _stable_uuid(node, name)
        devices.append(
            Device(node, name, minor, mig_uuid, model, bus, *versions, profile, parent_uuid, start)
        )
        start += profile.slices
    if start > 8:
        raise TopologyError(f"node {node}: MIG profiles of gpu-{minor} need {start} of 8 slices")
    return devices


def _node_devices(node: dict, versions: tuple[str, str]) -> list[Device]:
    devices: list[Device] = []
    for spec in node.get("gpus") or []:
        devices += _gpu_devices(node["name"], spec, len({d.minor for d in devices}), versions)
    return devices


def _objects(data: dict) -> list[dict]:
    """The `objects:` section: Nodes, ResourceSlices and DeviceClasses created as written
    (instead of the generated ones); without `nodes:`, its Nodes are the nodes."""
    objects = data.get("objects") or []
    kinds = {"Node", "ResourceSlice", "DeviceClass"}
    if not isinstance(objects, list) or any(
        not isinstance(obj, dict) or obj.get("kind") not in kinds for obj in objects
    ):
        raise TopologyError("`objects:` must list Nodes, ResourceSlices and DeviceClasses")
    if "nodes" not in data:
        data["nodes"] = [{"name": o["metadata"]["name"]} for o in objects if o["kind"] == "Node"]
    return objects


def from_dict(data: dict) -> Topology:
    """A Topology from the parsed YAML document."""
    objects = _objects(data) if isinstance(data, dict) else []
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise TopologyError("a topology needs a non-empty `nodes:` list")
    versions = (
        str(data.get("driverVersion", "580.95.5")),
        str(data.get("cudaDriverVersion", "13.0.0")),
    )
    devices_by_node, labels, taints = {}, {}, {}
    for node in data["nodes"]:
        if not isinstance(node, dict) or not node.get("name"):
            raise TopologyError("every node needs a `name`")
        devices_by_node[node["name"]] = _node_devices(node, versions)
        labels[node["name"]] = {str(k): str(v) for k, v in (node.get("labels") or {}).items()}
        taints[node["name"]] = _device_taints(node, devices_by_node[node["name"]])
    images, pull_seconds, sizes = _images(data)
    offline = data.get("offline", False)
    if not isinstance(offline, bool):
        raise TopologyError("`offline:` must be true or false")
    try:
        workloads = workloads_from_list(data.get("workloads"), list(devices_by_node))
    except WorkloadError as error:
        raise TopologyError(str(error)) from None
    return Topology(
        devices_by_node,
        images,
        labels,
        _registries(data),
        offline,
        objects,
        _pod_security(data),
        _seconds(data.get("image_pull_seconds", DEFAULT_PULL_SECONDS), "image_pull_seconds"),
        pull_seconds,
        sizes,
        workloads,
        taints,
        _kueue(data),
    )


def _kueue(data: dict) -> dict | None:
    section = data.get("kueue")
    if section is None or section is False:
        return None
    if section is True:
        return {}
    if not isinstance(section, dict) or set(section) - {"visibility"}:
        raise TopologyError("`kueue:` takes `visibility: true|false` (or is true)")
    return section


TAINT_KEYS = {"device", "key", "value", "effect", "timeAdded"}


def _device_taints(node: dict, devices: list[Device]) -> dict[str, list[dict]]:
    """A node's `deviceTaints:` [{device, key, value?, effect, timeAdded?}]: the taints its
    driver puts on those devices (as the NVIDIA driver may after an XID error). The API server
    validates them, and stamps timeAdded, when the slice is created."""
    names = {device.name for device in devices}
    found: dict[str, list[dict]] = {}
    for entry in node.get("deviceTaints") or []:
        if not isinstance(entry, dict) or set(entry) - TAINT_KEYS:
            raise TopologyError(f"a device taint has the keys {sorted(TAINT_KEYS)}: {entry!r}")
        if entry.get("device") not in names:
            raise TopologyError(f"node {node['name']}: no device {entry.get('device')!r}")
        taint = {k: str(v) for k, v in entry.items() if k != "device"}
        found.setdefault(entry["device"], []).append(taint)
    return found


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TopologyError(f"`{what}:` must be a number of seconds, 0 or more")
    return float(value)


def _images(data: dict) -> tuple[tuple[str, ...], dict[str, float], dict[str, int]]:
    """The `images:` section: the images the registries hold, each a reference or a mapping
    {image:, pull_seconds:, size:} (its own pull time and the size its Pulled event reports)."""
    names, seconds, sizes = [], {}, {}
    for entry in data.get("images") or DEFAULT_IMAGES:
        if isinstance(entry, str) and entry:
            names.append(entry)
            continue
        unknown = set(entry) - {"image", "pull_seconds", "size"} if isinstance(entry, dict) else {}
        if not isinstance(entry, dict) or unknown or not isinstance(entry.get("image"), str):
            raise TopologyError(
                "every `images:` entry is an image reference or {image:, pull_seconds:, size:}"
            )
        image = entry["image"]
        names.append(image)
        key = parse_image(image).full
        if "pull_seconds" in entry:
            seconds[key] = _seconds(entry["pull_seconds"], f"images: {image}: pull_seconds")
        size = entry.get("size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise TopologyError(f"`images: {image}: size` must be a number of bytes")
            sizes[key] = size
    return tuple(names), seconds, sizes


def _pod_security(data: dict) -> dict[str, str]:
    section = data.get("pod_security") or {}
    if not isinstance(section, dict) or set(section) - {"enforce", "warn", "audit"}:
        raise TopologyError("`pod_security:` takes enforce, warn and audit")
    for mode, level in section.items():
        if level not in ("privileged", "baseline", "restricted"):
            raise TopologyError(
                f"`pod_security: {{{mode}:}}` is privileged, baseline or restricted"
            )
    return {str(mode): str(level) for mode, level in section.items()}


def _registries(data: dict) -> dict[str, Registry]:
    """The `registries:` section: prefix -> {mirrors, requires_auth} (both optional)."""
    section = data.get("registries") or {}
    if not isinstance(section, dict):
        raise TopologyError("`registries:` must map registry hosts to their settings")
    registries = {}
    for prefix, settings in section.items():
        settings = settings or {}
        unknown = set(settings) - {"mirrors", "requires_auth"} if isinstance(settings, dict) else {}
        if not isinstance(settings, dict) or unknown or not str(prefix).strip("/"):
            raise TopologyError(
                f"registry {prefix!r}: settings may be `mirrors:` (a host or host/path) "
                "and `requires_auth:` (true or false)"
            )
        if not isinstance(settings.get("requires_auth", False), bool):
            raise TopologyError(f"registry {prefix!r}: `requires_auth:` must be true or false")
        key = str(prefix).strip("/")
        mirrors = str(settings.get("mirrors") or "").strip("/")
        registries[key] = Registry(key, mirrors, settings.get("requires_auth", False))
    return registries


def load(path: str | Path | None = None) -> Topology:
    """The topology in the YAML file at `path`, or the default one."""
    text = Path(path or DEFAULT_PATH).read_text()
    try:
        return from_dict(yaml.safe_load(text))
    except yaml.YAMLError as error:
        raise TopologyError(f"{path}: {error}") from None


def _node_info(name: str, k8s_version: str) -> dict:
    machine = hashlib.sha256(name.encode()).hexdigest()
    return {
        "machineID": machine[:32],
        "systemUUID": _stable_uuid("system", name),
        "bootID": _stable_uuid("boot", name),
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
