"""Which GPUs a claim holds, as dcgm-exporter names them: the join from a claim's allocation
to the device series, whether or not a Pod uses the devices.

dcgm-exporter labels a GPU's series with the DRA claim only while a Pod's container uses it
(the kubelet's pod-resources API), but every GPU's series always carry its `UUID`. NVIDIA's
DRA driver (k8s-dra-driver-gpu) publishes that UUID as the device attribute `uuid`
(`GPU-<8-4-4-4-12 hex>`) in its ResourceSlices; the portal's inventory keeps it, and the
claim's allocation rows carry it (claims/worker/sync.py, inventory.describe_devices). So a
claim's activity is read by its devices' UUIDs over the time it has held them
(`ClaimRequest.allocated_at`): a claim held with nothing running on it reads 0, not "no data".

A MIG device is not joined: dcgm-exporter labels its series with the parent GPU's UUID and
the GPU instance id (`GPU_I_ID`), which the ResourceSlice does not publish; such a claim (or
one whose allocation was seen before `allocated_at` was kept) is read by its DRA labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

# NVML's GPU UUID as the driver and dcgm-exporter write it.
GPU_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


@dataclass(frozen=True)
class Held:
    """The claim's GPUs by UUID, on which nodes, since when; or why they cannot be joined."""

    uuids: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    since: datetime | None = None
    why_not: str = ""

    @property
    def joined(self) -> bool:
        return bool(self.uuids) and self.since is not None and not self.why_not


def attribute(device: dict[str, Any], name: str) -> str:
    """A device attribute by its name, qualified by the driver's domain or not."""
    attributes = device.get("attributes") or {}
    for key in (name, f"{device.get('driver', '')}/{name}"):
        if key in attributes:
            return str(attributes[key])
    return ""


def held(claim: Any) -> Held:
    """The claim's allocated GPUs by UUID; `why_not` when they cannot be read that way."""
    allocation = claim.allocation or {}
    devices = allocation.get("devices") or []
    since = getattr(claim, "allocated_at", None)
    if not devices:
        return Held(why_not=_("it holds no device now"))
    if since is None:
        return Held(why_not=_("since when it holds its devices is not known"))
    uuids, nodes = [], []
    for device in devices:
        if attribute(device, "parentUUID") or attribute(device, "type") == "mig":
            return Held(why_not=_("it holds a MIG device (read by its DRA labels)"))
        uuid = attribute(device, "uuid")
        if not GPU_UUID.fullmatch(uuid):
            return Held(
                why_not=_("device %(device)s publishes no GPU uuid attribute")
                % {"device": device.get("device", "?")}
            )
        uuids.append(uuid)
        nodes.append(str(device.get("node") or device.get("pool") or allocation.get("node", "")))
    return Held(tuple(uuids), tuple(sorted(set(filter(None, nodes)))), since)


def uuid_selector(uuids: tuple[str, ...]) -> str:
    """PromQL: the series of these GPUs (UUIDs are plain hex and dashes: no escaping)."""
    return f'UUID=~"{"|".join(uuids)}"'
