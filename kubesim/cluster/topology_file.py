"""A topology file (docs/kubesim-topology.md) read and checked: `load(path)` and `from_dict`
make a Topology or raise TopologyError naming what is wrong."""

from pathlib import Path
from typing import Any

import yaml

from kubesim.cluster.dcgm_counters import dcgm_counters
from kubesim.cluster.hardware import (
    DEFAULT_IMAGES,
    DEFAULT_PATH,
    DEFAULT_PULL_SECONDS,
    Device,
    Topology,
    TopologyError,
    stable_uuid,
)
from kubesim.cluster.workloads import WorkloadError
from kubesim.cluster.workloads import from_list as workloads_from_list
from kubesim.kubelet.cuda import MIG_PROFILES, MODELS, GpuModel
from kubesim.kubelet.images import Registry
from kubesim.kubelet.images import parse as parse_image


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
        gpu_uuid = "GPU-" + stable_uuid(node, str(minor), model.product_name)
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
        mig_uuid = "MIG-" + stable_uuid(node, name)
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
        dcgm_counters(data.get("dcgmCounters"), TopologyError),
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
