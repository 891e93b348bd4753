"""Conversion of resource.k8s.io objects between v1beta1, v1beta2 and v1.

The storage form is the v1 shape. v1beta2 has the same shape as v1; v1beta1 keeps a
request's fields flat (no `exactly:`) and wraps a ResourceSlice device's fields in `basic:`.
Status is identical in every version.
"""

import copy
from typing import Any

GROUP = "resource.k8s.io"
STORAGE_VERSION = "v1"
VERSIONS = ("v1", "v1beta2", "v1beta1")

# Fields of a v1 ExactDeviceRequest that sit directly on a v1beta1 DeviceRequest.
EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def request_to_v1(request: dict) -> dict:
    """A v1beta1 DeviceRequest in the v1 shape: `exactly:` when any of its fields is set to
    something other than Go's zero value (upstream's hasAnyMainRequestFieldsSet), so a request
    with neither a class nor firstAvailable is refused as having neither."""
    converted = {key: value for key, value in request.items() if key not in EXACT_FIELDS}
    exact = {key: request[key] for key in EXACT_FIELDS if key in request}
    if any(value not in ("", 0, None) or value is False for value in exact.values()):
        converted["exactly"] = exact
    return converted


def request_to_v1beta1(request: dict) -> dict:
    """A v1 DeviceRequest in the flat v1beta1 shape."""
    converted = {key: value for key, value in request.items() if key != "exactly"}
    exact = request.get("exactly")
    converted.update(exact if isinstance(exact, dict) else {})
    return converted


def _convert_claim_spec(spec: dict | None, convert_request: Any) -> dict | None:
    """Convert the requests of a claim spec (a private copy) in place."""
    if not isinstance(spec, dict):
        return spec
    devices = spec.get("devices")
    if isinstance(devices, dict) and isinstance(devices.get("requests"), list):
        devices["requests"] = [
            convert_request(r) if isinstance(r, dict) else r for r in devices["requests"]
        ]
    return spec


def device_to_v1(device: dict) -> dict:
    """A v1beta1 ResourceSlice device with its `basic:` fields flattened."""
    basic = device.get("basic")
    if basic is not None and not isinstance(basic, dict):
        return dict(device)  # left for validation to reject
    converted = {key: value for key, value in device.items() if key != "basic"}
    converted.update(basic or {})
    return converted


def device_to_v1beta1(device: dict) -> dict:
    """A v1 ResourceSlice device with everything but its name under `basic:`."""
    converted = {key: value for key, value in device.items() if key == "name"}
    converted["basic"] = {key: value for key, value in device.items() if key != "name"}
    return converted


def _convert_slice_spec(spec: dict | None, convert_device: Any) -> dict | None:
    """Convert the devices of a slice spec (a private copy) in place."""
    if not isinstance(spec, dict):
        return spec
    if isinstance(spec.get("devices"), list):
        spec["devices"] = [convert_device(d) if isinstance(d, dict) else d for d in spec["devices"]]
    return spec


def _with_version(obj: dict, version: str) -> dict:
    converted = copy.deepcopy(obj)
    converted["apiVersion"] = f"{GROUP}/{version}"
    return converted


def _convert(obj: dict, kind: str, version: str, *, to_v1: bool) -> dict:
    target = STORAGE_VERSION if to_v1 else version
    converted = _with_version(obj, target)
    if version != "v1beta1":
        return converted
    convert_request = request_to_v1 if to_v1 else request_to_v1beta1
    convert_device = device_to_v1 if to_v1 else device_to_v1beta1
    spec = converted.get("spec")  # already a deep copy, converted in place
    if kind == "ResourceClaim" and "spec" in obj:
        converted["spec"] = _convert_claim_spec(spec, convert_request)
    elif kind == "ResourceClaimTemplate" and isinstance(spec, dict) and "spec" in spec:
        converted["spec"]["spec"] = _convert_claim_spec(spec["spec"], convert_request)
    elif kind == "ResourceSlice" and "spec" in obj:
        converted["spec"] = _convert_slice_spec(spec, convert_device)
    return converted


def to_storage(obj: dict, kind: str, version: str) -> dict:
    """The storage (v1) form of `obj`, which the client sent as `version`."""
    return _convert(obj, kind, version, to_v1=True)


def from_storage(obj: dict, kind: str, version: str) -> dict:
    """The storage-form `obj` as served in `version`."""
    return _convert(obj, kind, version, to_v1=False)
