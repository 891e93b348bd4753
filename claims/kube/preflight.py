"""The seed's prerequisites that an API client can check, as pure functions over what it read."""

import re

from claims.kube.parsing import ClusterInfo, DeviceClassInfo, DeviceInfo, PreflightCheck

MINIMUM_SERVER_VERSION = (1, 33)
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"


def server_version_tuple(git_version: str) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", git_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_server_version(info: ClusterInfo) -> PreflightCheck:
    version = server_version_tuple(info.server_version)
    ok = version is not None and version >= MINIMUM_SERVER_VERSION
    wanted = ".".join(map(str, MINIMUM_SERVER_VERSION))
    return PreflightCheck(
        "Kubernetes version", ok, f"{info.server_version or 'unknown'} (needs {wanted} or newer)"
    )


def check_dra_served(info: ClusterInfo) -> PreflightCheck:
    if not info.resource_versions:
        return PreflightCheck("DRA API (resource.k8s.io)", False, "not served by the cluster")
    detail = f"serves {', '.join(info.resource_versions)}; the portal uses "
    return PreflightCheck(
        "DRA API (resource.k8s.io)", True, detail + str(info.preferred_resource_version)
    )


def check_device_classes(classes: list[DeviceClassInfo]) -> PreflightCheck:
    names = ", ".join(c.name for c in classes)
    detail = names or "no DeviceClass exists (is the NVIDIA DRA driver installed?)"
    return PreflightCheck("DeviceClasses", bool(classes), detail)


def check_gpu_devices(devices: list[DeviceInfo]) -> PreflightCheck:
    gpus = [d for d in devices if d.driver == NVIDIA_GPU_DRIVER]
    if not gpus:
        detail = f"no ResourceSlice from driver {NVIDIA_GPU_DRIVER} publishes a device"
        return PreflightCheck("NVIDIA DRA driver", False, detail)
    detail = f"{len(gpus)} devices published by {NVIDIA_GPU_DRIVER}"
    return PreflightCheck("NVIDIA DRA driver", True, detail)


def check_gpu_nodes(devices: list[DeviceInfo], node_names: list[str]) -> PreflightCheck:
    gpu_nodes = sorted(
        {d.node for d in devices if d.driver == NVIDIA_GPU_DRIVER and d.node in node_names}
    )
    if not gpu_nodes:
        return PreflightCheck("GPU nodes", False, "no node offers a GPU through DRA")
    return PreflightCheck("GPU nodes", True, f"{len(gpu_nodes)}: {', '.join(gpu_nodes)}")


def skipped_without_dra() -> list[PreflightCheck]:
    reason = "cannot check: resource.k8s.io is not served"
    return [
        PreflightCheck(name, False, reason)
        for name in ("DeviceClasses", "NVIDIA DRA driver", "GPU nodes")
    ]
