"""Checks of what users type, with a reason a person can act on."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

import celpy
from django.conf import settings
from django.core.exceptions import ValidationError

from claims.models import Cluster

DNS_LABEL_MAX = 63
# The API server refuses a longer CEL selector (CELSelectorExpressionMaxLength).
CEL_SELECTOR_MAX_BYTES = 10 * 1024


def dns_label_problem(name: str) -> str | None:
    """Why name is not a DNS-1123 label, or None when it is one."""
    if not name:
        return "Enter a name."
    if len(name) > DNS_LABEL_MAX:
        return f"At most {DNS_LABEL_MAX} characters (this one has {len(name)})."
    if name != name.lower():
        return "Use lower-case letters only."
    if not re.fullmatch(r"[a-z0-9-]+", name):
        bad = sorted({ch for ch in name if not re.fullmatch(r"[a-z0-9-]", ch)})
        shown = " ".join(repr(ch) for ch in bad)
        return f"Only letters a-z, digits and '-' are allowed, not {shown}."
    if not name[0].isalnum():
        return "Start with a letter or a digit."
    if not name[-1].isalnum():
        return "End with a letter or a digit."
    return None


def validate_dns_label(name: str, field: str = "name") -> None:
    problem = dns_label_problem(name)
    if problem:
        raise ValidationError({field: [problem]})


def is_protected_namespace(name: str) -> bool:
    """A namespace of the cluster itself (kube-system, the GPU operator, ...), per settings."""
    return any(fnmatchcase(name, pattern) for pattern in settings.PROTECTED_NAMESPACES)


def validate_namespace_name(name: str) -> None:
    validate_dns_label(name)
    if is_protected_namespace(name):
        raise ValidationError(
            {"name": [f"{name!r} belongs to the cluster itself; the portal never manages it."]}
        )


def selector_problem(selector: str) -> str | None:
    """Why the CEL selector does not parse, or None (the cluster checks it again)."""
    if not selector:
        return None
    size = len(selector.encode())
    if size > CEL_SELECTOR_MAX_BYTES:
        return (
            f"At most {CEL_SELECTOR_MAX_BYTES} bytes (10 KiB), the cluster's limit "
            f"(this one has {size})."
        )
    try:
        celpy.Environment().compile(selector)
    except celpy.CELParseError as error:
        return f"Not a valid CEL expression: {error}"
    return None


def validate_claim_fields(
    *,
    cluster: Cluster,
    name: str,
    device_class: str,
    count: int | None,
    all_devices: bool,
    selector: str,
) -> None:
    """All problems at once, each next to its field."""
    problems = {
        "name": dns_label_problem(name),
        "device_class": _device_class_problem(cluster, device_class),
        "selector": selector_problem(selector),
    }
    if not problems["device_class"] and not all_devices:
        problems["count"] = _count_problem(cluster, device_class, count)
    errors = {field: [problem] for field, problem in problems.items() if problem}
    if errors:
        raise ValidationError(errors)


def _device_class_problem(cluster: Cluster, device_class: str) -> str | None:
    known = cluster.device_class_names()
    if not known:
        return f"The device classes of {cluster} are not known yet; try again in a moment."
    if device_class not in known:
        return f"{device_class!r} is not a device class of {cluster}. Known: {', '.join(known)}."
    return None


def _count_problem(cluster: Cluster, device_class: str, count: int | None) -> str | None:
    if count is None:
        return "Enter how many devices, or ask for all of them."
    if count < 1:
        return "Ask for at least 1 device."
    available = cluster.device_count(device_class)
    if count > available:
        return (
            f"{cluster} has {available} device(s) of class {device_class}; "
            f"ask for at most {available}."
        )
    return None
