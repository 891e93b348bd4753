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


# The resource.k8s.io version kube-scheduler and the kubelet of each release read DRA objects
# through: 1.32 and 1.33 use v1beta1 (their dynamicresources plugin imports
# k8s.io/api/resource/v1beta1; v1beta2 came in 1.33 for clients only), 1.34 and later use v1
# (DRA GA, kubernetes/kubernetes#132706). With that version turned off they allocate nothing.
SCHEDULER_DRA_VERSIONS = {(1, 32): "v1beta1", (1, 33): "v1beta1"}
FIRST_V1_SCHEDULER = (1, 34)


def scheduler_dra_version(version: tuple[int, int] | None) -> str | None:
    if version is None:
        return None
    if version >= FIRST_V1_SCHEDULER:
        return "v1"
    return SCHEDULER_DRA_VERSIONS.get(version)


def check_scheduler_dra(info: ClusterInfo) -> PreflightCheck:
    """The portal may talk any served version, but the scheduler needs its own one."""
    name = "DRA version the scheduler uses"
    version = server_version_tuple(info.server_version)
    needed = scheduler_dra_version(version)
    release = ".".join(map(str, version)) if version else info.server_version or "unknown"
    if needed is None:
        return PreflightCheck(
            name, False, f"Kubernetes {release} has no scheduler the portal knows"
        )
    served = ", ".join(info.resource_versions) or "nothing"
    if needed in info.resource_versions:
        return PreflightCheck(name, True, f"{needed} (Kubernetes {release}), served")
    detail = (
        f"Kubernetes {release}'s scheduler and kubelet use resource.k8s.io/{needed}, which the "
        f"cluster does not serve (it serves {served}): no claim can be allocated. "
        f"Turn it on with --runtime-config=resource.k8s.io/{needed}=true."
    )
    return PreflightCheck(name, False, detail)


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
