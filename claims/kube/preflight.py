"""The seed's prerequisites that an API client can check, as pure functions over what it read.

Each check is worded in English, as the cluster's row and the API keep it; the cluster page
shows it in its reader's language (claims.domain.state_messages lists MESSAGES for that).
"""

import re

from claims.kube.parsing import ClusterInfo, DeviceClassInfo, DeviceInfo, PreflightCheck

MINIMUM_SERVER_VERSION = (1, 33)
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"


def gettext_noop(message: str) -> str:
    """Marks a message for makemessages, as Django's function of that name does (this layer
    imports no Django)."""
    return message


KUBERNETES_VERSION = gettext_noop("Kubernetes version")
DRA_API = gettext_noop("DRA API (resource.k8s.io)")
SCHEDULER_DRA = gettext_noop("DRA version the scheduler uses")
DEVICE_CLASSES = gettext_noop("DeviceClasses")
GPU_DRIVER = gettext_noop("NVIDIA DRA driver")
GPU_NODES = gettext_noop("GPU nodes")

VERSION_NEEDED = gettext_noop("%(version)s (needs %(wanted)s or newer)")
DRA_NOT_SERVED = gettext_noop("not served by the cluster")
DRA_SERVED = gettext_noop("serves %(served)s; the portal uses %(version)s")
SCHEDULER_UNKNOWN = gettext_noop("Kubernetes %(release)s has no scheduler the portal knows")
SCHEDULER_SERVED = gettext_noop("%(needed)s (Kubernetes %(release)s), served")
SCHEDULER_NOT_SERVED = gettext_noop(
    "Kubernetes %(release)s's scheduler and kubelet use resource.k8s.io/%(needed)s, which the "
    "cluster does not serve (it serves %(served)s): no claim can be allocated. "
    "Turn it on with --runtime-config=%(flag)s."
)
NO_DEVICE_CLASS = gettext_noop("no DeviceClass exists (is the NVIDIA DRA driver installed?)")
NO_GPU_DEVICE = gettext_noop("no ResourceSlice from driver %(driver)s publishes a device")
GPU_DEVICES = gettext_noop("%(count)d devices published by %(driver)s")
NO_GPU_NODE = gettext_noop("no node offers a GPU through DRA")
CANNOT_CHECK = gettext_noop("cannot check: resource.k8s.io is not served")

# The ones with values, for claims.domain.state_messages.MESSAGES.
MESSAGES = (
    VERSION_NEEDED,
    DRA_SERVED,
    SCHEDULER_UNKNOWN,
    SCHEDULER_SERVED,
    SCHEDULER_NOT_SERVED,
    NO_GPU_DEVICE,
    GPU_DEVICES,
)


def server_version_tuple(git_version: str) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", git_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_server_version(info: ClusterInfo) -> PreflightCheck:
    version = server_version_tuple(info.server_version)
    ok = version is not None and version >= MINIMUM_SERVER_VERSION
    wanted = ".".join(map(str, MINIMUM_SERVER_VERSION))
    detail = VERSION_NEEDED % {"version": info.server_version or "unknown", "wanted": wanted}
    return PreflightCheck(KUBERNETES_VERSION, ok, detail)


def check_dra_served(info: ClusterInfo) -> PreflightCheck:
    if not info.resource_versions:
        return PreflightCheck(DRA_API, False, DRA_NOT_SERVED)
    served = ", ".join(info.resource_versions)
    detail = DRA_SERVED % {"served": served, "version": info.preferred_resource_version}
    return PreflightCheck(DRA_API, True, detail)


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
    version = server_version_tuple(info.server_version)
    needed = scheduler_dra_version(version)
    release = ".".join(map(str, version)) if version else info.server_version or "unknown"
    if needed is None:
        return PreflightCheck(SCHEDULER_DRA, False, SCHEDULER_UNKNOWN % {"release": release})
    if needed in info.resource_versions:
        detail = SCHEDULER_SERVED % {"needed": needed, "release": release}
        return PreflightCheck(SCHEDULER_DRA, True, detail)
    detail = SCHEDULER_NOT_SERVED % {
        "release": release,
        "needed": needed,
        "served": ", ".join(info.resource_versions) or "nothing",
        "flag": f"resource.k8s.io/{needed}=true",
    }
    return PreflightCheck(SCHEDULER_DRA, False, detail)


def check_device_classes(classes: list[DeviceClassInfo]) -> PreflightCheck:
    names = ", ".join(c.name for c in classes)
    return PreflightCheck(DEVICE_CLASSES, bool(classes), names or NO_DEVICE_CLASS)


def check_gpu_devices(devices: list[DeviceInfo]) -> PreflightCheck:
    gpus = [d for d in devices if d.driver == NVIDIA_GPU_DRIVER]
    if not gpus:
        return PreflightCheck(GPU_DRIVER, False, NO_GPU_DEVICE % {"driver": NVIDIA_GPU_DRIVER})
    detail = GPU_DEVICES % {"count": len(gpus), "driver": NVIDIA_GPU_DRIVER}
    return PreflightCheck(GPU_DRIVER, True, detail)


def check_gpu_nodes(devices: list[DeviceInfo], node_names: list[str]) -> PreflightCheck:
    gpu_nodes = sorted(
        {d.node for d in devices if d.driver == NVIDIA_GPU_DRIVER and d.node in node_names}
    )
    if not gpu_nodes:
        return PreflightCheck(GPU_NODES, False, NO_GPU_NODE)
    return PreflightCheck(GPU_NODES, True, f"{len(gpu_nodes)}: {', '.join(gpu_nodes)}")


def skipped_without_dra() -> list[PreflightCheck]:
    return [
        PreflightCheck(name, False, CANNOT_CHECK)
        for name in (DEVICE_CLASSES, GPU_DRIVER, GPU_NODES)
    ]
