"""Structured-parameters allocation: choose devices on one node for a Pod's claims.

Pure functions over plain dicts (storage form), as the scheduler's DRA plugin does it:
DeviceClass selectors and request selectors (CEL) must all hold, ExactCount or All,
firstAvailable subrequests in order, matchAttribute constraints, no device used twice, and no
device with a taint (NoSchedule or NoExecute, from its slice or a DeviceTaintRule) that the
request does not tolerate (DRADeviceTaints, taken as on).
"""

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubesim.base.cel_env import CelError, device_activation, holds

DeviceId = tuple[str, str, str]  # driver, pool, device


class ClassMissing(Exception):
    """A request names a DeviceClass that does not exist (rejected for the whole Pod)."""


class SelectorFailed(Exception):
    """A selector could not be evaluated on a device: upstream's allocator stops with
    "claim ns/x: selector #0: CEL runtime error: ..." and the scheduler fails the Pod's
    scheduling cycle with it (an error, not a mismatch that would try other devices)."""


@dataclass(frozen=True)
class Candidate:
    driver: str
    pool: str
    name: str
    node: str
    device: dict

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> object:
        domain, _, name = qualified.rpartition("/")
        attributes = self.device.get("attributes") or {}
        value = attributes.get(name if domain == self.driver else qualified)
        if value is None and domain == self.driver:
            value = attributes.get(qualified)
        return None if value is None else tuple(sorted(value.items()))


def candidates(slices: Iterable[dict], node: str) -> list[Candidate]:
    """The devices that ResourceSlices publish for `node` (node-local or all nodes)."""
    found = []
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        if spec.get("nodeName") != node and not spec.get("allNodes"):
            continue
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            found.append(Candidate(spec.get("driver", ""), pool, device["name"], node, device))
    return found


def tolerates(toleration: dict, taint: dict) -> bool:
    """resourceclaim.ToleratesTaint: an empty effect or key matches any; Equal (the default)
    compares values, Exists matches any value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def taints_tolerated(device: dict, tolerations: list[dict] | None) -> bool:
    """allTaintsTolerated: every taint of the device is tolerated by one of the request's."""
    return all(
        any(tolerates(toleration, taint) for toleration in tolerations or [])
        for taint in device.get("taints") or []
    )


def rule_selects(rule: dict, driver: str, pool: str, device: dict, classes: dict) -> bool:
    """Whether a DeviceTaintRule's deviceSelector picks the device (the resourceslice
    tracker's applyPatches): driver, pool, device name, then the class's and its own CEL
    selectors; a selector that fails to evaluate does not pick the device."""
    selector = (rule.get("spec") or {}).get("deviceSelector")
    if selector is None:
        return True
    for key, actual in (("driver", driver), ("pool", pool), ("device", device.get("name"))):
        if selector.get(key) is not None and selector[key] != actual:
            return False
    candidate = Candidate(driver, pool, device.get("name", ""), "", device)
    expressions = list(selector.get("selectors") or [])
    if selector.get("deviceClassName") is not None:
        device_class = classes.get(selector["deviceClassName"])
        if device_class is None:
            return False
        expressions = [*((device_class.get("spec") or {}).get("selectors") or []), *expressions]
    try:
        return _selectors_hold(expressions, candidate, "")
    except SelectorFailed:
        return False


def with_taint_rules(slices: list[dict], rules: list[dict], classes: dict) -> list[dict]:
    """The slices as the scheduler sees them: each rule's taint added to the devices it
    selects (ListWithDeviceTaintRules)."""
    if not rules:
        return slices
    patched = []
    for resource_slice in slices:
        resource_slice = copy.deepcopy(resource_slice)
        spec = resource_slice.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            for rule in rules:
                if rule_selects(rule, spec.get("driver", ""), pool, device, classes):
                    taint = (rule.get("spec") or {}).get("taint") or {}
                    device.setdefault("taints", []).append(dict(taint))
        patched.append(resource_slice)
    return patched


def _selectors_hold(selectors: list[dict] | None, candidate: Candidate, owner: str) -> bool:
    """All hold, evaluated in order up to the first that does not (as isSelectable)."""
    activation = device_activation(candidate.driver, candidate.device)
    for index, selector in enumerate(selectors or []):
        expression = ((selector or {}).get("cel") or {}).get("expression", "")
        try:
            if not holds(expression, activation):
                return False
        except CelError as error:
            raise SelectorFailed(
                f"{owner}: selector #{index}: CEL runtime error: {error}"
            ) from None
    return True


def matching(
    exact: dict,
    request_name: str,
    classes: dict[str, dict],
    devices: list[Candidate],
    claim_ref: str = "",
) -> list[Candidate]:
    """Devices that satisfy the request's class and its own selectors (the class's first)."""
    class_name = exact.get("deviceClassName", "")
    device_class = classes.get(class_name)
    if device_class is None:
        raise ClassMissing(f"request {request_name}: device class {class_name} does not exist")
    class_selectors = (device_class.get("spec") or {}).get("selectors") or []
    tolerations = exact.get("tolerations")
    return [
        d
        for d in devices
        if taints_tolerated(d.device, tolerations)  # checked first: cheaper than CEL
        and _selectors_hold(class_selectors, d, f"class {class_name}")
        and _selectors_hold(exact.get("selectors"), d, f"claim {claim_ref}")
    ]


@dataclass
class Slot:
    """One device to choose: which request it serves and which devices may fill it."""

    request: str
    options: list[Candidate]
    # The request's tolerations: the allocation result keeps a copy (DRADeviceTaints), which
    # the device taint eviction controller reads.
    tolerations: list[dict] | None = None


def _slots_for(
    exact: dict, name: str, options: list[Candidate], free: set[DeviceId]
) -> list[Slot] | None:
    tolerations = exact.get("tolerations") or None
    if exact.get("allocationMode") == "All":
        if not options or any(option.id not in free for option in options):
            return None
        return [Slot(name, [option], tolerations) for option in options]
    count = int(exact.get("count") or 1)
    available = [option for option in options if option.id in free]
    if len(available) < count:
        return None
    return [Slot(name, available, tolerations) for _ in range(count)]


def _constraints_hold(constraints: list[dict], chosen: list[tuple[str, Candidate]]) -> bool:
    for constraint in constraints or []:
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        scope = set(constraint.get("requests") or [])
        values = {
            candidate.attribute(attribute)
            for request, candidate in chosen
            if not scope or request in scope or request.split("/")[0] in scope
        }
        if len(values) > 1 or None in values:
            return False
    return True


def _search(
    slots: list[Slot], constraints: list[dict], chosen: list[tuple[str, Candidate]]
) -> list[tuple[str, Candidate]] | None:
    """Depth-first choice of one distinct device per slot that keeps the constraints."""
    if not _constraints_hold(constraints, chosen):
        return None
    if len(chosen) == len(slots):
        return chosen
    slot = slots[len(chosen)]
    taken = {candidate.id for _, candidate in chosen}
    for option in slot.options:
        if option.id not in taken:
            found = _search(slots, constraints, [*chosen, (slot.request, option)])
            if found is not None:
                return found
    return None


def _request_variants(request: dict) -> list[tuple[str, dict]]:
    if request.get("exactly") is not None:
        return [(request["name"], request["exactly"])]
    return [
        (f"{request['name']}/{sub['name']}", sub) for sub in request.get("firstAvailable") or []
    ]


def _claim_slots(
    claim: dict, classes: dict[str, dict], devices: list[Candidate], free: set[DeviceId]
) -> list[list[Slot]]:
    """Every combination of slots (one per firstAvailable choice), in preference order."""
    combinations: list[list[Slot]] = [[]]
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        extended = []
        for slots in combinations:
            for name, exact in _request_variants(request):
                options = matching(exact, request["name"], classes, devices, _ref(claim))
                request_slots = _slots_for(exact, name, options, free)
                if request_slots is not None:
                    extended.append(slots + request_slots)
        combinations = extended
    return combinations


def _ref(claim: dict) -> str:
    """klog.KObj's words for the claim: namespace/name."""
    metadata = claim.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def allocate(
    claim: dict, classes: dict[str, dict], devices: list[Candidate], in_use: set[DeviceId]
) -> list[dict] | None:
    """Allocation results for `claim` from the free `devices`, or None if it does not fit."""
    free = {d.id for d in devices} - in_use
    constraints = ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []
    for slots in _claim_slots(claim, classes, devices, free):
        chosen = _search(slots, constraints, [])
        if chosen is not None:
            return [
                _result(request, c, slot.tolerations)
                for (request, c), slot in zip(chosen, slots, strict=True)
            ]
    return None


def _result(request: str, candidate: Candidate, tolerations: list[dict] | None) -> dict:
    result: dict[str, Any] = {
        "request": request,
        "driver": candidate.driver,
        "pool": candidate.pool,
        "device": candidate.name,
    }
    if tolerations:
        result["tolerations"] = copy.deepcopy(tolerations)
    return result
