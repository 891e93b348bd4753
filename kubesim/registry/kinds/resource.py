"""Defaulting and validation of the resource.k8s.io kinds, on their storage (v1) form.

The alpha features DRAExtendedResource (DeviceClass `extendedResourceName`) and DRADeviceTaints
(device taints in slices, DeviceTaintRules in v1alpha3) are treated as enabled: a 1.34 server
with the gates off would drop those fields (docs/kubesim.md, "Feature gates").
"""

from datetime import UTC, datetime
from typing import Any

from kubesim.base import goprint
from kubesim.base.cel_env import compile_error
from kubesim.base.labels import (
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    LABEL_VALUE_MSG,
    NAME_PART_MSG,
    QUALIFIED_NAME,
)
from kubesim.registry.validation import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    UNSUPPORTED,
    FieldError,
    Printed,
    dns_label_errors,
    dns_subdomain_errors,
    metadata_name_errors,
)

MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize
MAX_CEL_LENGTH = 10 * 1024
ALLOCATION_MODES = ("All", "ExactCount")
REQUEST_REFERENCE_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
PLACEMENT_MSG = (
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
)


def default_exact_request(exact: dict) -> None:
    """SetDefaults_ExactDeviceRequest: mode ExactCount, count 1 (K-DEF)."""
    exact.setdefault("allocationMode", "ExactCount")
    if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
        exact["count"] = 1


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def default_claim_spec(spec: Any) -> None:
    """Wrongly typed parts are left alone: validation reports them."""
    for request in _list(_dict(_dict(spec).get("devices")).get("requests")):
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            default_exact_request(request["exactly"])
        for sub in _list(request.get("firstAvailable")):
            if isinstance(sub, dict):
                default_exact_request(sub)


def default_claim(obj: dict) -> None:
    default_claim_spec(obj.get("spec"))
    obj.setdefault("status", {})  # PrepareForCreate: a new claim answers `status: {}`


def default_template(obj: dict) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        # Go encodes the template's ObjectMeta struct even when empty (omitempty skips no struct).
        spec.setdefault("metadata", {})
    default_claim_spec(_dict(spec).get("spec"))


def default_nothing(obj: dict) -> None:
    return None


def selector_errors(selectors: Any, path: str) -> list[FieldError]:
    if selectors is None:
        return []
    if not isinstance(selectors, list):
        return [FieldError(INVALID, path, selectors, "must be a list")]
    if len(selectors) > MAX_SELECTORS:
        return [
            FieldError(TOO_MANY, path, len(selectors), f"must have at most {MAX_SELECTORS} items")
        ]
    errors = []
    for index, selector in enumerate(selectors):
        field = f"{path}[{index}].cel.expression"
        cel = (selector or {}).get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if cel is None:
            errors.append(FieldError(REQUIRED, f"{path}[{index}].cel"))
        elif not expression:
            errors.append(FieldError(REQUIRED, field))
        elif len(expression) > MAX_CEL_LENGTH:
            errors.append(
                FieldError(TOO_LONG, field, detail=f"may not be more than {MAX_CEL_LENGTH} bytes")
            )
        elif detail := compile_error(expression):
            errors.append(FieldError(INVALID, field, expression, detail))
    return errors


def count_errors(exact: dict, path: str) -> list[FieldError]:
    mode = exact.get("allocationMode")
    count = exact.get("count")
    if mode not in ALLOCATION_MODES:
        return [
            FieldError(
                UNSUPPORTED, f"{path}.allocationMode", mode, 'supported values: "All", "ExactCount"'
            )
        ]
    if mode == "ExactCount" and (not isinstance(count, int) or count <= 0):
        return [FieldError(INVALID, f"{path}.count", count, "must be greater than zero")]
    if mode == "All" and count:
        return [
            FieldError(
                INVALID,
                f"{path}.count",
                count,
                "must not be specified when allocationMode is 'All'",
            )
        ]
    return []


def exact_request_errors(exact: dict, path: str) -> list[FieldError]:
    errors = dns_subdomain_errors(exact.get("deviceClassName"), f"{path}.deviceClassName")
    errors += selector_errors(exact.get("selectors"), f"{path}.selectors")
    return errors + count_errors(exact, path)


def sub_request_errors(subs: Any, path: str) -> list[FieldError]:
    if not isinstance(subs, list):
        return [FieldError(INVALID, path, subs, "must be a list")]
    if len(subs) > MAX_SUBREQUESTS:
        # validateSet's size check short-circuits: no error about the items themselves.
        detail = f"must have at most {MAX_SUBREQUESTS} items"
        return [FieldError(TOO_MANY, path, len(subs), detail)]
    errors, duplicates, seen = [], [], set()
    for index, sub in enumerate(subs):
        field = f"{path}[{index}]"
        name = (sub or {}).get("name")
        errors += dns_label_errors(name, f"{field}.name")
        errors += exact_request_errors(sub or {}, field)
        if name in seen:  # validateSet reports duplicates after every item's own errors
            duplicates.append(FieldError(DUPLICATE, f"{field}.name", name))
        seen.add(name)
    return errors + duplicates


def request_errors(request: Any, path: str) -> list[FieldError]:
    if not isinstance(request, dict):
        return [FieldError(INVALID, path, request, "must be an object")]
    errors = dns_label_errors(request.get("name"), f"{path}.name")
    exact, first = request.get("exactly"), request.get("firstAvailable")
    detail = "exactly one of `exactly` or `firstAvailable` is required"
    if exact is None and not first:
        return [*errors, FieldError(REQUIRED, path, detail=detail)]
    if exact is not None and first:
        both = f"{detail}, but multiple fields are set"
        return [*errors, FieldError(INVALID, path, None, both)]
    if exact is not None:
        return errors + exact_request_errors(exact, f"{path}.exactly")
    return errors + sub_request_errors(first, f"{path}.firstAvailable")


def constraint_errors(constraints: Any, names: set[str | None], path: str) -> list[FieldError]:
    errors = []
    for index, constraint in enumerate(constraints or []):
        field = f"{path}[{index}]"
        for position, name in enumerate((constraint or {}).get("requests") or []):
            if not isinstance(name, str) or name.split("/", 1)[0] not in names:
                errors.append(
                    FieldError(
                        INVALID,
                        f"{field}.requests[{position}]",
                        name,
                        REQUEST_REFERENCE_MSG,
                    )
                )
        attribute = (constraint or {}).get("matchAttribute")
        if attribute is not None and "/" not in attribute:
            errors.append(
                FieldError(
                    INVALID,
                    f"{field}.matchAttribute",
                    attribute,
                    "a fully qualified name must be domain and name separated by a slash",
                )
            )
    return errors


def claim_spec_errors(spec: Any, path: str) -> list[FieldError]:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    if len(requests) > MAX_REQUESTS:
        return [
            FieldError(
                TOO_MANY,
                f"{path}.devices.requests",
                len(requests),
                f"must have at most {MAX_REQUESTS} items",
            )
        ]
    errors, seen = [], set()
    for index, request in enumerate(requests):
        field = f"{path}.devices.requests[{index}]"
        errors += request_errors(request, field)
        name = (request or {}).get("name") if isinstance(request, dict) else None
        if name and name in seen:
            errors.append(FieldError(DUPLICATE, f"{field}.name", name))
        seen.add(name)
    errors += constraint_errors(devices.get("constraints"), seen, f"{path}.devices.constraints")
    return errors


def validate_claim(obj: dict, old: dict | None) -> list[FieldError]:
    errors = metadata_name_errors(obj)
    if old is not None and obj.get("spec") != old.get("spec"):
        spec = Printed(goprint.claim_spec(obj.get("spec")))
        return [*errors, FieldError(INVALID, "spec", spec, "field is immutable")]
    return errors + claim_spec_errors(obj.get("spec"), "spec")


def validate_template(obj: dict, old: dict | None) -> list[FieldError]:
    errors = metadata_name_errors(obj)
    if old is not None and obj.get("spec") != old.get("spec"):
        return [*errors, FieldError(INVALID, "spec", obj.get("spec"), "field is immutable")]
    return errors + claim_spec_errors((obj.get("spec") or {}).get("spec"), "spec.spec")


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: not a native resource (no domain, or under
    kubernetes.io), not `requests.`-prefixed, and `requests.<name>` a qualified name."""
    domain, slash, _ = name.partition("/")
    native = not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    if native or name.startswith("requests."):
        return False
    return not qualified_name_problems(f"requests.{name}")


def validate_device_class(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = metadata_name_errors(obj)
    errors += selector_errors(spec.get("selectors"), "spec.selectors")
    name = spec.get("extendedResourceName")
    if name is not None and not is_extended_resource_name(str(name)):
        field = "spec.extendedResourceName"
        errors.append(FieldError(INVALID, field, name, "must be a valid extended resource name"))
    return errors


def qualified_name_problems(key: str) -> list[str]:
    """metav1validation.ValidateLabelName's (IsQualifiedName's) complaints."""
    if not key:
        return ["name part must be non-empty"]
    prefix, slash, name = key.rpartition("/")
    problems = []
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not QUALIFIED_NAME.match(name):
        problems.append(NAME_PART_MSG)
    if slash and not (prefix and len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)):
        problems.append("prefix part must be a valid DNS subdomain")
    return problems


def taint_errors(taint: Any, path: str) -> list[FieldError]:
    """validateDeviceTaint: key a label name, value a label value, effect required."""
    taint = _dict(taint)
    key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect")
    errors = [FieldError(INVALID, f"{path}.key", key, p) for p in qualified_name_problems(key)]
    if value and (len(value) > 63 or not LABEL_VALUE.match(value)):
        detail = "must be no more than 63 characters" if len(value) > 63 else LABEL_VALUE_MSG
        errors.append(FieldError(INVALID, f"{path}.value", value, detail))
    if not effect:
        errors.append(FieldError(REQUIRED, f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        detail = 'supported values: "NoExecute", "NoSchedule"'
        errors.append(FieldError(UNSUPPORTED, f"{path}.effect", effect, detail))
    return errors


TAINT_EFFECTS = ("NoExecute", "NoSchedule")
MAX_TAINTS = 4


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp_taint(taint: Any) -> None:
    """TimeAdded "added automatically during create or update if not set" (API@1.34)."""
    if isinstance(taint, dict) and not taint.get("timeAdded"):
        taint["timeAdded"] = _now()


def default_slice(obj: dict) -> None:
    for device in _list(_dict(obj.get("spec")).get("devices")):
        for taint in _list(_dict(device).get("taints")):
            stamp_taint(taint)


def default_taint_rule(obj: dict) -> None:
    stamp_taint(_dict(obj.get("spec")).get("taint"))


def validate_taint_rule(obj: dict, old: dict | None) -> list[FieldError]:
    """ValidateDeviceTaintRule (v1alpha3 in 1.34): the selector's names, and one taint."""
    spec = _dict(obj.get("spec"))
    errors = metadata_name_errors(obj)
    selector = _dict(spec.get("deviceSelector"))
    path = "spec.deviceSelector"
    if selector.get("deviceClassName") is not None:
        errors += dns_subdomain_errors(selector["deviceClassName"], f"{path}.deviceClassName")
    if selector.get("driver") is not None:
        errors += dns_subdomain_errors(selector["driver"], f"{path}.driver")
    if selector.get("device") is not None:
        errors += dns_label_errors(selector["device"], f"{path}.device")
    errors += selector_errors(selector.get("selectors"), f"{path}.selectors")
    return errors + taint_errors(spec.get("taint"), "spec.taint")


def slice_device_errors(devices: Any, path: str) -> list[FieldError]:
    errors, seen = [], set()
    for index, device in enumerate(devices or []):
        field = f"{path}[{index}].name"
        name = (device or {}).get("name")
        if "basic" in (device or {}):
            basic = device["basic"]
            errors.append(
                FieldError(INVALID, f"{path}[{index}].basic", basic, "must be of type object")
            )
        errors += dns_label_errors(name, field)
        if name in seen:
            errors.append(FieldError(DUPLICATE, field, name))
        seen.add(name)
        taints = _list(_dict(device).get("taints"))
        if len(taints) > MAX_TAINTS:
            detail = f"must have at most {MAX_TAINTS} items"
            errors.append(FieldError(TOO_MANY, f"{path}[{index}].taints", len(taints), detail))
        for position, taint in enumerate(taints):
            errors += taint_errors(taint, f"{path}[{index}].taints[{position}]")
    return errors


def validate_slice(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = metadata_name_errors(obj)
    if not spec.get("driver"):
        errors.append(FieldError(REQUIRED, "spec.driver"))
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        errors.append(FieldError(REQUIRED, "spec.pool.name"))
    placements = [
        key
        for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
        if spec.get(key)
    ]
    if len(placements) != 1:
        detail = PLACEMENT_MSG
        errors.append(FieldError(FORBIDDEN if placements else REQUIRED, "spec", detail=detail))
    return errors + slice_device_errors(spec.get("devices"), "spec.devices")
