"""The device picker: choices a person understands (GPU model, minimum memory, MIG profile),
offered from what the cluster's ResourceSlices publish, turned into the claim's CEL selector.

The attribute names are the NVIDIA DRA driver's (`productName`, `profile`, capacity `memory`,
in the driver's own domain); the expressions are the ones its documentation and the
Kubernetes tutorial use, e.g. `device.capacity['gpu.nvidia.com'].memory.compareTo(
quantity('40Gi')) >= 0`. Everything here is pure: the inventory is passed in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.utils.translation import gettext as _

import dracel

DEFAULT_DOMAIN = "gpu.nvidia.com"
MODEL_ATTRIBUTE = "productName"
PROFILE_ATTRIBUTE = "profile"
MEMORY_CAPACITY = "memory"
# A Kubernetes quantity as a person types it for memory: a number and a binary or decimal unit.
MEMORY_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")


@dataclass(frozen=True)
class Picks:
    gpu_model: str = ""
    min_memory: str = ""
    mig_profile: str = ""

    def __bool__(self) -> bool:
        return bool(self.gpu_model or self.min_memory or self.mig_profile)


@dataclass(frozen=True)
class Options:
    """What the devices of one class publish, for the picker's lists."""

    domain: str = DEFAULT_DOMAIN
    models: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        """False when the inventory has no device of the class (not synced, or unknown)."""
        return bool(self.models or self.memories or self.profiles)


def cel_string(text: str) -> str:
    """A CEL single-quoted string literal holding `text`."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def selector_for(picks: Picks, domain: str = DEFAULT_DOMAIN) -> str:
    """The CEL selector the picks make ("" for no picks); each pick is one && clause."""
    attributes = f"device.attributes[{cel_string(domain)}]"
    clauses = []
    if picks.gpu_model:
        clauses.append(f"{attributes}.{MODEL_ATTRIBUTE} == {cel_string(picks.gpu_model)}")
    if picks.mig_profile:
        clauses.append(f"{attributes}.{PROFILE_ATTRIBUTE} == {cel_string(picks.mig_profile)}")
    if picks.min_memory:
        memory = f"device.capacity[{cel_string(domain)}].{MEMORY_CAPACITY}"
        clauses.append(f"{memory}.compareTo(quantity({cel_string(picks.min_memory)})) >= 0")
    return " && ".join(clauses)


def combined(generated: str, written: str) -> str:
    """The claim's selector: the picker's clauses and what the user wrote, both must hold."""
    generated, written = generated.strip(), written.strip()
    if generated and written:
        return f"{generated} && ({written})"
    return generated or written


def options(inventory: dict[str, Any], device_class: str) -> Options:
    """Models, memory sizes and MIG profiles the devices of the class publish, sorted."""
    devices = devices_of_class(inventory, device_class)
    if not devices:
        return Options()
    domain = devices[0]["driver"]
    models = {_own(d, "attributes", MODEL_ATTRIBUTE) for d in devices}
    profiles = {_own(d, "attributes", PROFILE_ATTRIBUTE) for d in devices}
    memories = {_own(d, "capacity", MEMORY_CAPACITY) for d in devices}
    return Options(
        domain=domain,
        models=sorted(str(m) for m in models if m),
        memories=sorted((str(m) for m in memories if m), key=_quantity, reverse=True),
        profiles=sorted(str(p) for p in profiles if p),
    )


def devices_of_class(inventory: dict[str, Any], device_class: str) -> list[dict[str, Any]]:
    """The inventory's devices the class's own selectors select (as the scheduler does)."""
    classes = {dc["name"]: dc for dc in inventory.get("device_classes", [])}
    if device_class not in classes:
        return []
    expressions = tuple(classes[device_class].get("selectors") or ())
    devices = inventory.get("devices", [])
    chosen = _chosen(expressions, json.dumps(devices, sort_keys=True))
    return [devices[index] for index in chosen]


@lru_cache(maxsize=64)
def _chosen(expressions: tuple[str, ...], devices_json: str) -> tuple[int, ...]:
    """Which devices the expressions select. CEL costs about a millisecond a device, and
    every claim form keystroke and submit asks again of an inventory that seldom changes."""
    devices = json.loads(devices_json)
    return tuple(index for index, device in enumerate(devices) if _holds(list(expressions), device))


def _holds(expressions: list[str], device: dict[str, Any]) -> bool:
    activation = dracel.device_activation(device["driver"], device)
    return all(dracel.matches(expression, activation) for expression in expressions)


def _own(device: dict[str, Any], part: str, name: str) -> Any:
    """An attribute or capacity in the device's driver domain (bare or qualified name)."""
    values = device.get(part) or {}
    return values.get(name, values.get(f"{device['driver']}/{name}"))


def _quantity(text: str) -> Decimal:
    try:
        return dracel.parse_quantity(text)
    except (ValueError, ArithmeticError, dracel.CelError):
        return Decimal(0)


def problems(picks: Picks, offered: Options) -> dict[str, str]:
    """Field errors for picks the cluster cannot honour (an empty inventory checks syntax only)."""
    found: dict[str, str] = {}
    if picks.min_memory and not MEMORY_QUANTITY.match(picks.min_memory):
        found["min_memory"] = _(
            "%(memory)r is not a memory size; write it like 40Gi, 80Gi or 4864Mi."
        ) % {"memory": picks.min_memory}
    if not offered.known:
        return found
    if picks.gpu_model and picks.gpu_model not in offered.models:
        known = ", ".join(offered.models)
        found["gpu_model"] = _("No device of this class is a %(model)r. Known: %(known)s.") % {
            "model": picks.gpu_model,
            "known": known,
        }
    if picks.mig_profile and picks.mig_profile not in offered.profiles:
        known = ", ".join(offered.profiles) or _("none (this class has no MIG devices)")
        found["mig_profile"] = _(
            "No device of this class has MIG profile %(profile)r. Known: %(known)s."
        ) % {"profile": picks.mig_profile, "known": known}
    return found
