"""A ResourceClaim spec printed the way the API server prints it in a "field is immutable"
error: encoding/json of the internal Go struct, so Go field names in declaration order,
every field present, zero values and nil (null) for what the client left out."""

from __future__ import annotations

import json
from typing import Any

Fields = list[tuple[str, Any]]


def _list(items: Any, convert: Any) -> list[Any] | None:
    return None if items is None else [convert(item or {}) for item in items]


def _selector(selector: dict[str, Any]) -> dict[str, Any]:
    cel = selector.get("cel")
    return {"CEL": None if cel is None else {"Expression": cel.get("expression", "")}}


def _toleration(toleration: dict[str, Any]) -> dict[str, Any]:
    return {
        "Key": toleration.get("key", ""),
        "Operator": toleration.get("operator", ""),
        "Value": toleration.get("value", ""),
        "Effect": toleration.get("effect", ""),
        "TolerationSeconds": toleration.get("tolerationSeconds"),
    }


def _capacity(capacity: dict[str, Any] | None) -> dict[str, Any] | None:
    if capacity is None:
        return None
    requests = capacity.get("requests")
    return {"Requests": None if requests is None else dict(sorted(requests.items()))}


def _exact(exact: dict[str, Any], *, sub_request: bool = False) -> dict[str, Any]:
    fields: dict[str, Any] = {"Name": exact.get("name", "")} if sub_request else {}
    fields |= {
        "DeviceClassName": exact.get("deviceClassName", ""),
        "Selectors": _list(exact.get("selectors"), _selector),
        "AllocationMode": exact.get("allocationMode", ""),
        "Count": exact.get("count", 0),
    }
    if not sub_request:
        fields["AdminAccess"] = exact.get("adminAccess")
    fields["Tolerations"] = _list(exact.get("tolerations"), _toleration)
    fields["Capacity"] = _capacity(exact.get("capacity"))
    return fields


def _request(request: dict[str, Any]) -> dict[str, Any]:
    exact = request.get("exactly")
    return {
        "Name": request.get("name", ""),
        "Exactly": None if exact is None else _exact(exact),
        "FirstAvailable": _list(
            request.get("firstAvailable"), lambda sub: _exact(sub, sub_request=True)
        ),
    }


def _constraint(constraint: dict[str, Any]) -> dict[str, Any]:
    return {
        "Requests": constraint.get("requests"),
        "MatchAttribute": constraint.get("matchAttribute"),
        "DistinctAttribute": constraint.get("distinctAttribute"),
    }


def _config(config: dict[str, Any]) -> dict[str, Any]:
    opaque = config.get("opaque")
    return {  # DeviceConfiguration is embedded: its field Opaque sits beside Requests
        "Requests": config.get("requests"),
        "Opaque": None
        if opaque is None
        else {"Driver": opaque.get("driver", ""), "Parameters": opaque.get("parameters")},
    }


def claim_spec(spec: dict[str, Any] | None) -> str:
    """The %v of a resource.ResourceClaimSpec (its value in a field error)."""
    devices = (spec or {}).get("devices") or {}
    value = {
        "Devices": {
            "Requests": _list(devices.get("requests"), _request),
            "Constraints": _list(devices.get("constraints"), _constraint),
            "Config": _list(devices.get("config"), _config),
        }
    }
    return go_json(value)


def go_json(value: Any) -> str:
    """json.dumps as Go's encoding/json writes it: compact, UTF-8, HTML characters escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
