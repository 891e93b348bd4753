"""The cluster's device classes and devices as the portal keeps them (Cluster.inventory).

Device counts per class come from evaluating each class's CEL selectors against the devices,
as the scheduler does, so "count more than the cluster has" is checked against real numbers.
`held_outside` lists the devices something other than this portal holds (claims made outside
it, and the claims the scheduler made for Pods asking for an extended resource such as
`nvidia.com/gpu`): whoever holds a device, it is not free. Nor is a tainted one: each device row
carries its taints, its driver's (in the ResourceSlice) and the DeviceTaintRules' that select it;
a NoSchedule or NoExecute taint keeps the scheduler from giving it to a claim that does not
tolerate it, and the portal's claims tolerate none.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import asdict
from typing import Any

import celpy

from claims.kube.parsing import DeviceClassInfo, DeviceInfo, Holding, TaintRule

# The effects that keep a device from a claim that does not tolerate them (DRADeviceTaints).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

log = logging.getLogger(__name__)


def device_for_cel(device: dict[str, Any]) -> dict[str, Any]:
    """The `device` variable of a DRA CEL expression: attributes grouped by domain."""
    driver = device["driver"]
    attributes: dict[str, dict[str, Any]] = {}
    for key, value in device.get("attributes", {}).items():
        domain, _, name = key.rpartition("/")
        attributes.setdefault(domain or driver, {})[name] = value
    capacity: dict[str, dict[str, Any]] = {}
    for key, value in device.get("capacity", {}).items():
        domain, _, name = key.rpartition("/")
        capacity.setdefault(domain or driver, {})[name] = value
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    # Compiled once per expression: a real cluster has many devices and few classes.
    env = celpy.Environment()
    return env.program(env.compile(expression))


def _device_key(device: dict[str, Any]) -> str:
    """What a CEL expression can see of a device (driver, attributes, capacity), as a key."""
    seen = [device["driver"], device.get("attributes", {}), device.get("capacity", {})]
    return json.dumps(seen, sort_keys=True, default=str)


# Remembered per process: an expression on a device gives the same answer until the device
# changes (a new key). Every queue decision, free count and inventory refresh asks again for
# the same few classes on the same devices, and interpreting CEL is what those cost most.
@functools.lru_cache(maxsize=65536)
def _holds(expression: str, device_key: str) -> bool | None:
    driver, attributes, capacity = json.loads(device_key)
    device = {"driver": driver, "attributes": attributes, "capacity": capacity}
    activation = {"device": celpy.json_to_cel(device_for_cel(device))}
    try:
        result = _program(expression).evaluate(activation)
    except Exception as error:  # a compile or evaluation error: the caller decides
        log.debug("CEL %r on %s: %s", expression, device_key[:200], error)
        return None
    # celpy returns some evaluation errors instead of raising them.
    return None if isinstance(result, Exception) else bool(result)


def matches(expressions: list[str], device: dict[str, Any]) -> bool:
    """True when every expression holds for the device; an evaluation error is a no, as in
    the scheduler."""
    key = _device_key(device)
    return all(_holds(expression, key) for expression in expressions)


def selector_holds(expression: str, device: dict[str, Any]) -> bool | None:
    """Whether one expression holds for the device; None when it cannot be evaluated here."""
    return _holds(expression, _device_key(device))


def device_counts(classes: list[dict[str, Any]], devices: list[dict[str, Any]]) -> dict[str, int]:
    return {
        dc["name"]: sum(1 for device in devices if matches(dc["selectors"], device))
        for dc in classes
    }


def build_inventory(
    classes: list[DeviceClassInfo],
    devices: list[DeviceInfo],
    outside: list[Holding] | None = None,
    taint_rules: list[TaintRule] | None = None,
) -> dict[str, Any]:
    class_rows = [asdict(dc) for dc in classes]
    device_rows = [asdict(device) for device in devices]
    for rule in taint_rules or []:
        for row in device_rows:
            if rule_selects(rule, row, class_rows):
                row["taints"] = [*row.get("taints", []), dict(rule.taint)]
    return {
        "device_classes": class_rows,
        "devices": device_rows,
        "device_counts": device_counts(class_rows, device_rows),
        "held_outside": held_outside_rows(outside or []),
    }


def rule_selects(rule: TaintRule, device: dict[str, Any], classes: list[dict[str, Any]]) -> bool:
    """Whether a DeviceTaintRule's selector picks the device, as the scheduler's slice tracker
    decides: driver, pool and device name, then its class's CEL selectors and its own (a
    class that does not exist, or an expression that fails, picks nothing)."""
    wanted = (("driver", rule.driver), ("pool", rule.pool), ("name", rule.device))
    if any(value is not None and device[key] != value for key, value in wanted):
        return False
    expressions = list(rule.selectors)
    if rule.device_class is not None:
        by_name = {dc["name"]: dc["selectors"] for dc in classes}
        if rule.device_class not in by_name:
            return False
        expressions = [*by_name[rule.device_class], *expressions]
    return matches(expressions, device)


def blocking_taints(device: dict[str, Any]) -> list[dict[str, str]]:
    return [t for t in device.get("taints") or [] if t.get("effect") in BLOCKING_EFFECTS]


def tainted_ids(inv: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Devices no claim of the portal can get: tainted NoSchedule or NoExecute."""
    return {
        (device["driver"], device["pool"], device["name"])
        for device in inv.get("devices") or []
        if blocking_taints(device)
    }


def unavailable_ids(inv: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Devices not free for the portal's claims whatever it holds: held outside it, or
    tainted."""
    return held_outside_ids(inv) | tainted_ids(inv)


def requested_as(inv: dict[str, Any], device_classes: list[str]) -> str:
    """The extended resource a Pod asked for to get devices of these classes: the class's
    extendedResourceName, else the implicit deviceclass.resource.kubernetes.io/<class>."""
    names = {
        dc["name"]: dc.get("extended_resource_name") or "" for dc in inv.get("device_classes") or []
    }
    found = [names.get(c) or f"deviceclass.resource.kubernetes.io/{c}" for c in device_classes]
    return ", ".join(found)


def held_outside_rows(outside: list[Holding]) -> list[dict[str, Any]]:
    """One row per device held outside the portal, in a stable order (a change of order is
    no change of the inventory)."""
    rows = [
        {"driver": driver, "pool": pool, "device": device, "kind": holding.kind}
        | {"namespace": holding.namespace, "name": holding.name}
        | ({"device_classes": list(holding.device_classes)} if holding.device_classes else {})
        for holding in outside
        for driver, pool, device in holding.devices
    ]
    return sorted(rows, key=lambda row: (row["driver"], row["pool"], row["device"]))


def held_outside(inv: dict[str, Any]) -> list[dict[str, Any]]:
    """The inventory's rows of devices held outside the portal (see held_outside_rows)."""
    return list(inv.get("held_outside") or [])


def held_outside_ids(inv: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(row["driver"], row["pool"], row["device"]) for row in held_outside(inv)}


def describe_devices(
    inventory: dict[str, Any], allocated: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Allocated devices with their attributes and capacity from the ResourceSlices."""
    known = {(d["driver"], d["pool"], d["name"]): d for d in inventory.get("devices", [])}
    described = []
    for device in allocated:
        info = known.get((device["driver"], device["pool"], device["device"]), {})
        described.append(
            {
                **device,
                "node": info.get("node"),
                "attributes": info.get("attributes", {}),
                "capacity": info.get("capacity", {}),
            }
        )
    return described
