"""The simulated cluster's hardware as kubesim models it: the Topology (nodes, their GPU and
MIG devices, images, registries) and its defaults (two nodes, 4 x H100 80GB HBM3 and 4 x
A100-SXM4-40GB, as the NVIDIA DRA driver, v25.8 style, publishes them)."""

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kubesim.cluster.workloads import Workload
from kubesim.kubelet.cuda import GpuModel, MigProfile
from kubesim.kubelet.images import Registry
from kubesim.kubelet.images import parse as parse_image

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
    # The counters its dcgm-exporters publish (`dcgmCounters:`); () = default-counters.csv's.
    dcgm_counters: tuple[str, ...] = ()
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


def stable_uuid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kubesim/" + "/".join(parts)))
