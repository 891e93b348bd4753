"""What each simulated GPU is doing, as NVIDIA's dcgm-exporter publishes it on a node.

Values follow what runs (the kubelet tells `started`/`forget`): a GPU no running container
uses is idle (activity 0, no framebuffer used, idle power); a container's program
(`programs.Program.gpu_activity`, `gpu_memory_fraction`) loads the GPUs its claims gave it:
NVIDIA's CUDA samples a short burst while they run, train-sim the `--load` it was given, a
notebook next to nothing. Power lies between the model's idle draw and its TDP by activity;
`DCGM_FI_DEV_XID_ERRORS` is 0 until an admin raises one (`raise_xid`).

The text is dcgm-exporter's (internal/pkg/rendermetrics/render_metrics.go): a HELP and TYPE
line per counter of etc/default-counters.csv (or of the topology's `dcgmCounters:`, the CSV an
operator gives it instead, e.g. with DCGM_FI_PROF_SM_ACTIVE), then per GPU
`FIELD{gpu,UUID,pci_bus_id,device,modelName[,GPU_I_PROFILE,GPU_I_ID],hostname,<labels>,
<attributes>} value`, labels (DCGM_FI_DRIVER_VERSION) and attributes each in key order.
With KUBERNETES_ENABLE_DRA (internal/pkg/transformation/kubernetes.go) a GPU held by pods'
containers through DRA claims has one series per container with pod, namespace, container
and dra_claim_name, dra_claim_namespace, dra_driver_name, dra_pool_name, dra_device_name
(dra_mig_profile, dra_mig_device_uuid for a MIG device); `dra_labels=False` plays an exporter
without it (older, or the flag off): pod labels only through the device plugin, so none.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from kubesim.registry.kinds import kind_for
from kubesim.registry.reservations import allocation_results, claim_names_by_pod_claim, pod_claims

PODS = kind_for("", "pods")
DRA_DRIVER = "gpu.nvidia.com"
# (field, Prometheus type, help) in etc/default-counters.csv's order, the ones kubesim fills.
COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
)
# What etc/default-counters.csv enables: all of the above but DCGM_FI_PROF_SM_ACTIVE, which it
# has commented out (an operator's own CSV, e.g. etc/dcp-metrics-included.csv, enables it; a
# topology's `dcgmCounters:` plays that).
OPTIONAL = ("DCGM_FI_PROF_SM_ACTIVE",)
DEFAULT_COUNTERS = tuple(field for field, _, _ in COUNTERS if field not in OPTIONAL)
# Board power (W): idle draw and TDP, from NVIDIA's data sheets (SXM parts).
POWER = {
    "NVIDIA H100 80GB HBM3": (72.0, 700.0),
    "NVIDIA H200": (75.0, 700.0),
    "NVIDIA A100-SXM4-40GB": (56.0, 400.0),
    "NVIDIA A100-SXM4-80GB": (60.0, 400.0),
}
DEFAULT_POWER = (60.0, 400.0)
RESERVED_MIB = 512  # what the driver keeps of the framebuffer (DCGM_FI_DEV_FB_RESERVED)


@dataclass
class Process:
    """A running container's program on the GPUs its claims gave it."""

    uid: str
    devices: tuple[tuple[str, str], ...]  # (node, device name)
    activity: float
    memory_fraction: float
    ends: float  # time.monotonic() when it exits


class GpuMetrics:
    """The numbers behind each node's dcgm-exporter; the kubelet keeps it current."""

    def __init__(self, store: Any, topology: Any) -> None:
        self.store, self.topology = store, topology
        self._lock = threading.Lock()
        self._processes: dict[tuple[str, str, str], Process] = {}
        self._xids: dict[tuple[str, str], int] = {}
        self._energy: dict[tuple[str, int], tuple[float, float]] = {}  # mJ, when counted
        self.dra_labels = True

    def started(
        self, key: tuple[str, str, str], uid: str, devices: list, program: Any, ends: float
    ) -> None:
        process = Process(
            uid,
            tuple((device.node, device.name) for device in devices),
            float(getattr(program, "gpu_activity", 0.0)),
            float(getattr(program, "gpu_memory_fraction", 0.0)),
            ends,
        )
        with self._lock:
            self._processes[key] = process

    def forget(self, pod_key: tuple[str, str]) -> None:
        with self._lock:
            for key in [k for k in self._processes if k[:2] == pod_key]:
                del self._processes[key]

    def raise_xid(self, node: str, device: str, xid: int) -> None:
        if self.topology.device(node, device) is None:
            raise KeyError(f"{node}/{device}")
        with self._lock:
            self._xids[(node, device)] = int(xid)

    def clear_xids(self) -> None:
        with self._lock:
            self._xids.clear()

    # -- what a GPU does now -----------------------------------------------------------------

    def load(self, device: Any) -> tuple[float, float]:
        """(activity 0-1, framebuffer fraction used) of the programs running on `device`."""
        now = time.monotonic()
        activity = memory = 0.0
        with self._lock:
            processes = list(self._processes.items())
        for key, process in processes:
            on_device = (device.node, device.name) in process.devices and process.ends > now
            if on_device and self._container_running(key, process.uid):
                activity += process.activity
                memory += process.memory_fraction
        return min(activity, 1.0), min(memory, 0.95)

    def _container_running(self, key: tuple[str, str, str], uid: str) -> bool:
        try:
            pod = self.store.get(PODS, key[0], key[1], copy=False)
        except Exception:
            return False
        if pod["metadata"].get("uid") != uid:
            return False
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == key[2]:
                return "running" in (status.get("state") or {})
        return False

    def values(self, device: Any) -> dict[str, str]:
        activity, memory_fraction = self.load(device)
        total = _memory_mib(device)
        used = round((total - RESERVED_MIB) * memory_fraction)
        idle, tdp = POWER.get(device.model.product_name, DEFAULT_POWER)
        power = idle + (tdp - idle) * activity
        clock = device.model.clock_mhz if activity else 345
        return {
            "DCGM_FI_DEV_SM_CLOCK": str(clock),
            "DCGM_FI_DEV_MEM_CLOCK": str(device.model.memory_clock_mhz),
            "DCGM_FI_DEV_MEMORY_TEMP": str(round(30 + 35 * activity)),
            "DCGM_FI_DEV_GPU_TEMP": str(round(29 + 45 * activity)),
            "DCGM_FI_DEV_POWER_USAGE": f"{power:f}",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": str(self._energy_mj(device, power)),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "0",
            # Coarse: the share of time any kernel ran, above what the engines really do.
            "DCGM_FI_DEV_GPU_UTIL": str(round(min(activity * 1.15, 1.0) * 100)),
            "DCGM_FI_DEV_MEM_COPY_UTIL": str(round(activity * 40)),
            "DCGM_FI_DEV_XID_ERRORS": str(self._xids.get((device.node, device.name), 0)),
            "DCGM_FI_DEV_FB_FREE": str(total - RESERVED_MIB - used),
            "DCGM_FI_DEV_FB_USED": str(used),
            "DCGM_FI_DEV_FB_RESERVED": str(RESERVED_MIB),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"{activity:f}",
            # Some SMs wait while the engine is busy: at most the engine's activity.
            "DCGM_FI_PROF_SM_ACTIVE": f"{activity * 0.9:f}",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f"{activity * 0.6:f}",
            "DCGM_FI_PROF_DRAM_ACTIVE": f"{activity * 0.45:f}",
        }

    def _energy_mj(self, device: Any, power: float) -> int:
        key, now = (device.node, device.minor), time.monotonic()
        with self._lock:
            energy, then = self._energy.get(key, (0.0, now))
            energy += power * (now - then) * 1000
            self._energy[key] = (energy, now)
        return int(energy)

    # -- who holds it (the kubelet's pod resources API) ------------------------------------

    def holders(self, node: str) -> dict[str, list[dict[str, str]]]:
        """Device name -> the DRA attributes of each container of an active pod on `node`
        whose claims allocated it, as dcgm-exporter's toDeviceToPodsDRA builds them."""
        holders: dict[str, list[dict[str, str]]] = {}
        pods, _ = self.store.list(PODS)
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            if pod["spec"].get("nodeName") != node or phase in ("Succeeded", "Failed"):
                continue
            for device, attributes in _pod_holders(self.store, pod):
                if attributes not in holders.setdefault(device, []):
                    holders[device].append(attributes)
        return holders

    def exposition(self, node: str) -> str | None:
        """The /metrics text of `node`'s dcgm-exporter; None for a node without GPUs."""
        devices = self.topology.devices_by_node.get(node)
        if not devices:
            return None
        holders = self.holders(node) if self.dra_labels else {}
        rows = [(device, self.values(device), holders.get(device.name, [{}])) for device in devices]
        lines = []
        enabled = set(getattr(self.topology, "dcgm_counters", ()) or DEFAULT_COUNTERS)
        for field, prom_type, help_text in COUNTERS:
            if field not in enabled:
                continue
            lines.append(f"# HELP {field} {help_text}")
            lines.append(f"# TYPE {field} {prom_type}")
            for device, values, attribute_sets in rows:
                for attributes in attribute_sets:
                    lines.append(f"{field}{{{_labels(device, attributes)}}} {values[field]}")
        return "\n".join(lines) + "\n"


def _memory_mib(device: Any) -> int:
    if device.mig:
        return int(device.mig.memory_mib)
    return int(device.model.cuda_memory_bytes // 2**20) + RESERVED_MIB


def _pod_holders(store: Any, pod: dict) -> list[tuple[str, dict[str, str]]]:
    names = claim_names_by_pod_claim(pod)
    claims = {claim["metadata"]["name"]: claim for claim in pod_claims(store, pod)}
    found = []
    for container in pod["spec"].get("containers") or []:
        for reference in (container.get("resources") or {}).get("claims") or []:
            claim = claims.get(names.get(reference.get("name"), ""))
            for result in allocation_results(claim):
                if claim is None or result.get("driver") != DRA_DRIVER:
                    continue
                attributes = {
                    "pod": pod["metadata"]["name"],
                    "namespace": pod["metadata"].get("namespace", ""),
                    "container": container["name"],
                    "dra_claim_name": claim["metadata"]["name"],
                    "dra_claim_namespace": claim["metadata"].get("namespace", ""),
                    "dra_driver_name": result["driver"],
                    "dra_pool_name": result["pool"],
                    "dra_device_name": result["device"],
                }
                found.append((result["device"], attributes))
    return found


def _labels(device: Any, attributes: dict[str, str]) -> str:
    pairs = [
        ("gpu", str(device.minor)),
        ("UUID", device.parent_uuid or device.uuid),
        ("pci_bus_id", "0000" + device.pci_bus_id),
        ("device", f"nvidia{device.minor}"),
        ("modelName", device.model.product_name),
    ]
    if device.mig:
        pairs += [("GPU_I_PROFILE", device.mig.name), ("GPU_I_ID", str(device.mig_start))]
    pairs.append(("hostname", device.node))
    pairs.append(("DCGM_FI_DRIVER_VERSION", device.driver_version))
    extra = dict(attributes)
    if device.mig and extra:
        extra.update({"dra_mig_profile": device.mig.name, "dra_mig_device_uuid": device.uuid})
    pairs += sorted(extra.items())
    return ",".join(f'{name}="{_escape(value)}"' for name, value in pairs)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
