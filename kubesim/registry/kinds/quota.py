"""ResourceQuota's validation (ValidateResourceQuota): names a quota may limit and the
quantities it takes. The quota admission and status live in kubesim/registry/quota.py."""

from __future__ import annotations

import re
from typing import Any

from kubesim.base import errors
from kubesim.base.cel_env import parse_quantity
from kubesim.registry.validation import INVALID, FieldError, metadata_name_errors

QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


# IsStandardQuotaResourceName: the names a quota may limit without a "/" (hugepages-* too).
STANDARD_QUOTA_RESOURCES = {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory",
    "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
}  # fmt: skip
INTEGER_RESOURCES = STANDARD_QUOTA_RESOURCES - {
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
}  # fmt: skip
QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def _is_integer_resource(name: str) -> bool:
    """IsIntegerResourceName: object counts and extended resources (a "/" outside the
    kubernetes.io namespace) take whole numbers."""
    if name in INTEGER_RESOURCES or name.startswith("count/"):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _hard_errors(key: str, text: Any) -> list[FieldError]:
    field = f"spec.hard[{key}]"
    found = []
    if "/" not in key and key not in STANDARD_QUOTA_RESOURCES and "hugepages-" not in key:
        found.append(FieldError(INVALID, field, key, "must be a standard resource for quota"))
    value = parse_quantity(str(text))
    if value < 0:
        found.append(FieldError(INVALID, field, str(text), "must be greater than or equal to 0"))
    if _is_integer_resource(key) and value != int(value):
        found.append(FieldError(INVALID, field, str(text), "must be an integer"))
    return found


def validate_resource_quota(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """ValidateResourceQuota's checks of the name and spec.hard (scopes are not simulated);
    a value that is no quantity fails decoding first, as a 400."""
    hard = (obj.get("spec") or {}).get("hard") or {}
    found = metadata_name_errors(obj)
    for key, text in sorted(hard.items()):
        if not QUANTITY.match(str(text)):
            kind = 'ResourceQuota in version "v1" cannot be handled as a ResourceQuota'
            raise errors.bad_request(f"{kind}: {QUANTITY_FORMAT}")
        found += _hard_errors(key, text)
    return found
