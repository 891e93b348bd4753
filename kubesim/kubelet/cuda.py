"""The GPUs kubesim knows, and what NVIDIA's CUDA samples print on them.

Output follows the printf strings of NVIDIA/cuda-samples v12.5 (vectorAdd.cu, deviceQuery.cpp);
per-model figures come from public deviceQuery captures. CUDA reports a little less global
memory than NVML, whose total the DRA driver publishes as capacity `memory` (BinarySI, so a
whole number of GiB prints as `Gi`): H100 80GB HBM3 81559Mi, A100-SXM4-40GB 40Gi (40960Mi),
A100-SXM4-80GB 80Gi (81920Mi), H200 143771Mi, as nvidia-smi's memory.total shows them.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.kubelet.images import canonical

RUNTIME_VERSION = "12.5"
SAMPLE_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:"
TEXTURE_SIZES = "1D=(131072), 2D=(131072, 65536), 3D=(16384, 16384, 16384)"
COMPUTE_MODE = (
    "Default (multiple host threads can use ::cudaSetDevice() with device simultaneously)"
)
# _ConvertSMVer2Cores of helper_cuda.h (v12.5), for the architectures a data centre runs.
CORES_PER_MP = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128}


@dataclass(frozen=True)
class GpuModel:
    product_name: str
    architecture: str
    compute_capability: str
    memory: str
    cuda_memory_bytes: int
    multiprocessors: int
    clock_mhz: int
    memory_clock_mhz: int
    bus_width: int
    l2_bytes: int
    shared_per_mp: int
    brand: str = "Nvidia"


@dataclass(frozen=True)
class MigProfile:
    name: str
    gi_profile_id: int
    slices: int
    multiprocessors: int
    memory_mib: int


H100 = GpuModel(
    "NVIDIA H100 80GB HBM3",
    "Hopper",
    "9.0.0",
    "81559Mi",
    85017755648,
    132,
    1980,
    2619,
    5120,
    52428800,
    233472,
)
A100_40 = GpuModel(
    "NVIDIA A100-SXM4-40GB",
    "Ampere",
    "8.0.0",
    "40Gi",
    42505273344,
    108,
    1410,
    1215,
    5120,
    41943040,
    167936,
)
A100_80 = GpuModel(
    "NVIDIA A100-SXM4-80GB",
    "Ampere",
    "8.0.0",
    "80Gi",
    85100068864,
    108,
    1410,
    1593,
    5120,
    41943040,
    167936,
)
H200 = GpuModel(
    "NVIDIA H200",
    "Hopper",
    "9.0.0",
    "143771Mi",
    150109880320,
    132,
    1980,
    3201,
    6016,
    62914560,
    233472,
)
MODELS = {
    "H100-80GB-HBM3": H100,
    "A100-SXM4-40GB": A100_40,
    "A100-SXM4-80GB": A100_80,
    "H200": H200,
}
_MIG_40GB = (
    MigProfile("1g.5gb", 19, 1, 14, 4864),
    MigProfile("2g.10gb", 14, 2, 28, 9984),
    MigProfile("3g.20gb", 9, 4, 42, 19968),
    MigProfile("7g.40gb", 0, 8, 98, 40192),
)
_MIG_80GB = (
    MigProfile("1g.10gb", 19, 1, 16, 9856),
    MigProfile("2g.20gb", 14, 2, 32, 20096),
    MigProfile("3g.40gb", 9, 4, 60, 40320),
    MigProfile("7g.80gb", 0, 8, 132, 80896),
)
# By productName: the capacity NVML reports differs between 80 GB models (A100: 80Gi,
# H100: 81559Mi), their MIG profiles do not.
MIG_PROFILES = {
    (model.product_name, profile.name): profile
    for model, profiles in ((A100_40, _MIG_40GB), (A100_80, _MIG_80GB), (H100, _MIG_80GB))
    for profile in profiles
}


@dataclass(frozen=True)
class SampleRun:
    lines: list[str]
    exit_code: int


def vector_add(devices: Sequence[Any]) -> SampleRun:
    if not devices:
        failure = (
            "Failed to allocate device vector A (error code no CUDA-capable device is detected)!"
        )
        return SampleRun(["[Vector addition of 50000 elements]", failure], 1)
    lines = [
        "[Vector addition of 50000 elements]",
        "Copy input data from the host memory to the CUDA device",
        "CUDA kernel launch with 196 blocks of 256 threads",
        "Copy output data from the CUDA device to the host memory",
        "Test PASSED",
        "Done",
    ]
    return SampleRun(lines, 0)


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _device_header(index: int, device: Any) -> list[str]:
    model: GpuModel = device.model
    capability = _major_minor(model.compute_capability)
    cores = CORES_PER_MP.get(capability, 128)
    memory = device.cuda_memory_bytes
    mps = device.multiprocessors
    name = f"{model.product_name} MIG {device.mig.name}" if device.mig else model.product_name
    driver = _major_minor(device.cuda_driver_version)
    clock = model.clock_mhz
    return [
        "",
        f'Device {index}: "{name}"',
        _row("CUDA Driver Version / Runtime Version", f"{driver} / {RUNTIME_VERSION}"),
        _row("CUDA Capability Major/Minor version number:", capability),
        _row("Total amount of global memory:", f"{memory / 2**20:.0f} MBytes ({memory} bytes)"),
        f"  ({mps:03d}) Multiprocessors, ({cores:03d}) CUDA Cores/MP:    {mps * cores} CUDA Cores",
        _row("GPU Max Clock rate:", f"{clock} MHz ({clock / 1000:0.2f} GHz)"),
        _row("Memory Clock rate:", f"{model.memory_clock_mhz} Mhz"),
        _row("Memory Bus Width:", f"{model.bus_width}-bit"),
        _row("L2 Cache Size:", f"{model.l2_bytes} bytes"),
    ]


def _row(label: str, value: str) -> str:
    """One `label   value` line of deviceQuery, values aligned at column 49."""
    return f"  {label}".ljust(49) + value


def _device_limits(device: Any) -> list[str]:
    bus = int(device.pci_bus_id.split(":")[1], 16)
    return [
        _row("Maximum Texture Dimension Size (x,y,z)", TEXTURE_SIZES),
        "  Maximum Layered 1D Texture Size, (num) layers  1D=(32768), 2048 layers",
        "  Maximum Layered 2D Texture Size, (num) layers  2D=(32768, 32768), 2048 layers",
        "  Total amount of constant memory:               65536 bytes",
        "  Total amount of shared memory per block:       49152 bytes",
        f"  Total shared memory per multiprocessor:        {device.model.shared_per_mp} bytes",
        "  Total number of registers available per block: 65536",
        "  Warp size:                                     32",
        "  Maximum number of threads per multiprocessor:  2048",
        "  Maximum number of threads per block:           1024",
        "  Max dimension size of a thread block (x,y,z): (1024, 1024, 64)",
        "  Max dimension size of a grid size    (x,y,z): (2147483647, 65535, 65535)",
        "  Maximum memory pitch:                          2147483647 bytes",
        "  Texture alignment:                             512 bytes",
        "  Concurrent copy and kernel execution:          Yes with 3 copy engine(s)",
        "  Run time limit on kernels:                     No",
        "  Integrated GPU sharing Host Memory:            No",
        "  Support host page-locked memory mapping:       Yes",
        "  Alignment requirement for Surfaces:            Yes",
        "  Device has ECC support:                        Enabled",
        "  Device supports Unified Addressing (UVA):      Yes",
        "  Device supports Managed Memory:                Yes",
        "  Device supports Compute Preemption:            Yes",
        "  Supports Cooperative Kernel Launch:            Yes",
        "  Supports MultiDevice Co-op Kernel Launch:      Yes",
        f"  Device PCI Domain ID / Bus ID / location ID:   0 / {bus} / 0",
        "  Compute Mode:",
        f"     < {COMPUTE_MODE} >",
    ]


def _peer_lines(devices: Sequence[Any]) -> list[str]:
    lines = []
    for i, first in enumerate(devices):
        for j, second in enumerate(devices):
            if i != j:
                same = (
                    "Yes" if first.node == second.node and not (first.mig or second.mig) else "No"
                )
                pair = f"{first.product_name} (GPU{i}) -> {second.product_name} (GPU{j})"
                lines.append(f"> Peer access from {pair} : {same}")
    return lines


def device_query(devices: Sequence[Any]) -> SampleRun:
    head = [
        "/cuda-samples/sample Starting...",
        "",
        " CUDA Device Query (Runtime API) version (CUDART static linking)",
        "",
    ]
    if not devices:
        return SampleRun(
            [
                *head,
                "cudaGetDeviceCount returned 100",
                "-> no CUDA-capable device is detected",
                "Result = FAIL",
            ],
            1,
        )
    lines = [*head, f"Detected {len(devices)} CUDA Capable device(s)"]
    for index, device in enumerate(devices):
        lines += _device_header(index, device) + _device_limits(device)
    if len(devices) > 1:
        lines += _peer_lines(devices)
    driver = _major_minor(devices[0].cuda_driver_version)
    summary = (
        f"deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = {driver}, "
        f"CUDA Runtime Version = {RUNTIME_VERSION}, NumDevs = {len(devices)}"
    )
    return SampleRun([*lines, "", summary, "Result = PASS"], 0)


def run_image(image: str, devices: Sequence[Any], registries: Any = None) -> SampleRun:
    """What a container of `image` prints on `devices`; the caller checks the image is known.
    An image under a mirror in `registries` (topology.registries) runs as the one it mirrors."""
    tag = canonical(registries or {}, image).removeprefix(SAMPLE_IMAGE)
    if tag.startswith("devicequery"):
        return device_query(devices)
    return vector_add(devices)
