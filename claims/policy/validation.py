"""Checks of what users type, with a reason a person can act on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import dracel
from claims.models import Cluster
from claims.policy import device_picker
from claims.policy.device_picker import Picks

DNS_LABEL_MAX = 63
# DRA's prioritized list holds at most 8 subrequests (FirstAvailableDeviceRequestMaxSize).
MAX_ALTERNATIVES = 8
# The API server refuses a longer CEL selector (CELSelectorExpressionMaxLength).
CEL_SELECTOR_MAX_BYTES = 10 * 1024


def dns_label_problem(name: str) -> str | None:
    """Why name is not a DNS-1123 label, or None when it is one."""
    if not name:
        return _("Enter a name.")
    if len(name) > DNS_LABEL_MAX:
        return _("At most %(max)d characters (this one has %(length)d).") % {
            "max": DNS_LABEL_MAX,
            "length": len(name),
        }
    if name != name.lower():
        return _("Use lower-case letters only.")
    if not re.fullmatch(r"[a-z0-9-]+", name):
        bad = sorted({ch for ch in name if not re.fullmatch(r"[a-z0-9-]", ch)})
        shown = " ".join(repr(ch) for ch in bad)
        return _("Only letters a-z, digits and '-' are allowed, not %(shown)s.") % {"shown": shown}
    if not name[0].isalnum():
        return _("Start with a letter or a digit.")
    if not name[-1].isalnum():
        return _("End with a letter or a digit.")
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
            {
                "name": [
                    _("%(name)r belongs to the cluster itself; the portal never manages it.")
                    % {"name": name}
                ]
            }
        )


def selector_problem(selector: str) -> str | None:
    """Why the API server would refuse the CEL selector, or None: shortly, what is wrong and
    where (line, column), not the parser's list of every token it could have taken.

    dracel compiles it against the DRA CEL environment as kube-apiserver 1.34 does: syntax,
    fields of `device`, function overloads and a boolean result.
    """
    if not selector:
        return None
    size = len(selector.encode())
    if size > CEL_SELECTOR_MAX_BYTES:
        return _("At most %(max)d bytes (10 KiB), the cluster's limit (this one has %(size)d).") % {
            "max": CEL_SELECTOR_MAX_BYTES,
            "size": size,
        }
    problem = dracel.first_problem(selector)
    if problem is None:
        return None
    if problem.kind == "result":
        return _(
            "Not a valid CEL expression: it must be a condition (true or false), not a %(type)s."
        ) % {"type": problem.token}
    return _("Not a valid CEL expression at line %(line)d, column %(column)d: %(what)s") % {
        "line": problem.line,
        "column": problem.column,
        "what": _what_is_wrong(problem),
    }


def _what_is_wrong(problem: dracel.Problem) -> str:
    token, expected = _quoted(problem.token), problem.expected
    if problem.kind == "check":
        return problem.detail + "."
    if problem.kind == "string":
        return _("the text that starts here has no closing quote.")
    if problem.kind == "character":
        return _("%(char)s cannot be used here.") % {"char": token}
    if problem.kind == "end" and expected == "value":
        return _("it ends too soon: a value is missing at the end.")
    if problem.kind == "end" and expected:
        return _("it ends too soon: %(expected)s is missing.") % {"expected": expected}
    if problem.kind == "end":
        return _("it ends too soon.")
    if expected == "value":
        return _("a value is missing before %(token)s.") % {"token": token}
    if expected:
        return _("%(expected)s is missing before %(token)s.") % {
            "expected": expected,
            "token": token,
        }
    return _("%(token)s is not expected here.") % {"token": token}


def _quoted(token: str) -> str:
    return token if token[:1] in ("'", '"') else f"'{token}'"


@dataclass(frozen=True)
class SelectorMatch:
    """How many published devices of a class a selector matches (from the last inventory)."""

    matched: int
    total: int
    device_class: str

    def __str__(self) -> str:
        return ngettext(
            "matches %(matched)d of %(total)d device of class %(class)s",
            "matches %(matched)d of %(total)d devices of class %(class)s",
            self.total,
        ) % {"matched": self.matched, "total": self.total, "class": self.device_class}


def selector_match(cluster: Cluster, device_class: str, selector: str) -> SelectorMatch | None:
    """Evaluate a valid selector on the devices of the class, as the scheduler would.

    None when there is nothing to say: no selector, a selector the cluster refuses, or a
    class the inventory does not know.
    """
    if not selector or selector_problem(selector):
        return None
    classes = {dc["name"]: dc for dc in cluster.inventory.get("device_classes", [])}
    if device_class not in classes:
        return None
    class_selectors = list(classes[device_class].get("selectors") or [])
    devices = [
        device
        for device in cluster.inventory.get("devices", [])
        if _matches_all(class_selectors, device)
    ]
    matched = sum(1 for device in devices if _matches_all([selector], device))
    return SelectorMatch(matched=matched, total=len(devices), device_class=device_class)


def _matches_all(expressions: list[str], device: dict[str, Any]) -> bool:
    activation = dracel.device_activation(device["driver"], device)
    return all(dracel.matches(expression, activation) for expression in expressions)


def selector_preview(cluster: Cluster, device_class: str, selector: str) -> dict[str, Any]:
    """What the claim form's preview says about the selector the user wrote: only what is
    wrong with it (how many devices match is the feasibility statement's to say)."""
    return {"selector_problem": selector_problem(selector)}


def _selector_field_problem(
    cluster: Cluster, device_class: str, selector: str, written: str
) -> str | None:
    # The part the user wrote first: its lines and columns are the ones they typed.
    problem = selector_problem(written) or selector_problem(selector)
    if problem:
        return problem
    match = selector_match(cluster, device_class, selector)
    if match is not None and match.matched == 0 and match.total > 0:
        return _(
            "No device in the cluster matches this selector: it %(match)s on %(cluster)s. "
            "Check the attribute names and values on the cluster page."
        ) % {"match": match, "cluster": cluster}
    return None


def claim_selector(*, cluster: Cluster, device_class: str, picks: Picks, selector: str) -> str:
    """The selector a claim carries: the picker's clauses and the CEL the user wrote, both
    must hold. Picks the devices of the class do not publish are field errors."""
    if not picks:  # nothing picked: no need to look at what the devices publish
        return device_picker.combined("", selector)
    offered = device_picker.options(cluster.inventory, device_class)
    problems = device_picker.problems(picks, offered)
    if problems:
        raise ValidationError({field: [problem] for field, problem in problems.items()})
    return device_picker.combined(device_picker.selector_for(picks, offered.domain), selector)


def selector_field_of(picks: Picks | None, written: str) -> str:
    """Where a problem of the combined selector shows: the user's CEL, else the picker."""
    if written or not picks:
        return "selector"
    return "gpu_model" if picks.gpu_model else "mig_profile" if picks.mig_profile else "min_memory"


def validate_claim_fields(
    *,
    cluster: Cluster,
    name: str,
    device_class: str,
    count: int | None,
    all_devices: bool,
    selector: str,
    picks: Picks | None = None,
    written: str = "",
) -> None:
    """All problems at once, each next to its field. `selector` is the claim's whole
    selector; `written` the part the user typed (the rest came from the picker's `picks`)."""
    problems = {"name": dns_label_problem(name)}
    problems |= _device_problems(
        cluster, device_class, count, all_devices, selector, picks, written
    )
    errors = {field: [problem] for field, problem in problems.items() if problem}
    if errors:
        raise ValidationError(errors)


def _device_problems(
    cluster: Cluster,
    device_class: str,
    count: int | None,
    all_devices: bool,
    selector: str,
    picks: Picks | None,
    written: str,
) -> dict[str, str | None]:
    """What is wrong with which devices an alternative asks for, by field."""
    selector_field = selector_field_of(picks, written)
    problems = {
        "device_class": device_class_problem(cluster, device_class),
        selector_field: _selector_field_problem(cluster, device_class, selector, written),
    }
    if not problems["device_class"] and not all_devices:
        problems["count"] = _count_problem(cluster, device_class, count)
        if not problems["count"] and not cluster.device_count(device_class):
            problems["device_class"] = _("%(cluster)s has no device of class %(class)s.") % {
                "cluster": cluster,
                "class": device_class,
            }
    return problems


ALTERNATIVE_FIELDS = (
    "device_class",
    "gpu_model",
    "min_memory",
    "mig_profile",
    "count",
    "all_devices",
)


def alternative_key(position: int, field: str) -> str:
    """Where a field error of the alternative at `position` (2 and on) goes: `alt2_count`."""
    return f"alt{position}_{field}"


def split_alternative_key(key: str) -> tuple[int, str] | None:
    """(position, field) of an alternative_key, None for any other field."""
    found = re.fullmatch(r"alt([0-9]+)_(.+)", key)
    return (int(found.group(1)), found.group(2)) if found else None


def further_alternatives(
    *, cluster: Cluster, alternatives: list[dict[str, Any]], written: str
) -> list[dict[str, Any]]:
    """The alternatives after the first as a claim stores them, each checked as the first
    is and its picks made into its selector (the user's own CEL must hold for each too).
    Field errors are keyed by alternative_key."""
    if len(alternatives) + 1 > MAX_ALTERNATIVES:
        raise ValidationError(
            {"alternatives": [_("At most %(max)d alternatives.") % {"max": MAX_ALTERNATIVES}]}
        )
    cleaned, errors = [], {}
    for position, wanted in enumerate(alternatives, start=2):
        try:
            cleaned.append(_alternative(cluster, wanted, written))
        except ValidationError as error:
            for field, messages in error.message_dict.items():
                errors[alternative_key(position, field)] = messages
    if errors:
        raise ValidationError(errors)
    return cleaned


def _alternative(cluster: Cluster, wanted: dict[str, Any], written: str) -> dict[str, Any]:
    picks = Picks(*(str(wanted.get(f) or "").strip() for f in ALTERNATIVE_FIELDS[1:4]))
    device_class = str(wanted.get("device_class") or "").strip()
    all_devices = bool(wanted.get("all_devices"))
    count = None if all_devices else wanted.get("count", 1)
    selector = claim_selector(
        cluster=cluster, device_class=device_class, picks=picks, selector=written
    )
    problems = _device_problems(cluster, device_class, count, all_devices, selector, picks, written)
    errors = {field: [problem] for field, problem in problems.items() if problem}
    if errors:
        raise ValidationError(errors)
    return {
        "device_class": device_class,
        "gpu_model": picks.gpu_model,
        "min_memory": picks.min_memory,
        "mig_profile": picks.mig_profile,
        "count": count,
        "all_devices": all_devices,
        "selector": selector,
    }


def device_class_problem(cluster: Cluster, device_class: str) -> str | None:
    """Why a claim cannot name this class on this cluster (None: it can)."""
    known = cluster.device_class_names()
    if not known:
        return _("The device classes of %(cluster)s are not known yet; try again in a moment.") % {
            "cluster": cluster
        }
    if device_class not in known:
        return _("%(class)r is not a device class of %(cluster)s. Known: %(known)s.") % {
            "class": device_class,
            "cluster": cluster,
            "known": ", ".join(known),
        }
    return None


def _count_problem(cluster: Cluster, device_class: str, count: int | None) -> str | None:
    if count is None:
        return _("Enter how many devices, or ask for all of them.")
    if count < 1:
        return _("Ask for at least 1 device.")
    available = cluster.device_count(device_class)
    if available and count > available:  # none at all is the device class's problem
        return _(
            "%(cluster)s has %(available)d device(s) of class %(class)s; "
            "ask for at most %(available)d."
        ) % {"cluster": cluster, "available": available, "class": device_class}
    return None
