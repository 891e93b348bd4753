"""Checks of what a workload runs (an admin's profile, a user's changes to it), each with a
reason a person can act on, against the rules the API server applies."""

from __future__ import annotations

import re
import shlex
from decimal import Decimal, InvalidOperation
from fnmatch import fnmatchcase
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

import dracel

# The grammar of an image reference, as github.com/distribution/reference's regexp.go:
# [domain[:port]/]path[:tag][@digest], lower-case path components.
_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
NAME_TOTAL_MAX = 255
# validation.IsEnvVarName (k8s.io/apimachinery/pkg/util/validation): a C identifier with
# '-' and '.' allowed, not "." or "..".
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
# The shape resource.ParseQuantity accepts (k8s.io/apimachinery/pkg/api/resource).
QUANTITY = re.compile(r"[+-]?[0-9.]+(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")
PORT_MIN, PORT_MAX = 1, 65535
RESOURCE_FIELDS = ("cpu_request", "cpu_limit", "memory_request", "memory_limit")


def image_problem(reference: str) -> str | None:
    if not reference:
        return _("Enter an image, e.g. nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04.")
    if any(ch.isspace() for ch in reference):
        return _("An image reference has no spaces.")
    match = IMAGE_REFERENCE.fullmatch(reference)
    if match is None:
        return _(
            "%(image)r is not an image reference: [registry[:port]/]path[:tag][@digest], "
            "the path in lower case."
        ) % {"image": reference}
    if len(match.group("name")) > NAME_TOTAL_MAX:
        return _("The image's name is longer than %(max)d characters.") % {"max": NAME_TOTAL_MAX}
    return None


def image_allowed(reference: str, *, default: str, allow_any: bool, listed: list[str]) -> bool:
    """The profile's own image, any image, or one of the listed (an entry ending in "*" is a
    prefix: "nvcr.io/nvidia/*")."""
    if allow_any or reference == default:
        return True
    return any(
        fnmatchcase(reference, entry) if entry.endswith("*") else reference == entry
        for entry in listed
    )


def shell_words(text: str, field: str) -> list[str]:
    """A command line as the shell splits it; a field error when it does not parse."""
    try:
        return shlex.split(text or "")
    except ValueError as error:
        message = _("This does not parse as shell words (%(error)s); check the quotes.")
        raise ValidationError({field: [message % {"error": error}]}) from None


def env_problems(env: Any) -> list[str]:
    if not isinstance(env, dict):
        return [_("Give the environment as names and values.")]
    problems = []
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_VAR_NAME.fullmatch(name) or name in (".", ".."):
            problems.append(
                _(
                    "%(name)r is not a name Kubernetes accepts for an environment variable: "
                    "letters, digits, '_', '-' and '.', not starting with a digit."
                )
                % {"name": name}
            )
        elif not isinstance(value, str):
            problems.append(_("The value of %(name)s must be text.") % {"name": name})
    return problems


def parse_env_lines(text: str) -> dict[str, str]:
    """NAME=value lines (a form's textarea) as a dict; a line without "=" is a field error."""
    env: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep:
            message = _("Line %(line)d: write NAME=value.") % {"line": number}
            raise ValidationError({"env": [message]})
        env[name.strip()] = value
    return env


def env_lines(env: dict[str, str]) -> str:
    return "\n".join(f"{name}={value}" for name, value in env.items())


def quantity_value(text: str) -> Decimal | None:
    """A quantity's value, None when it is none ("4 cores", "1.2.3", "-1")."""
    if not QUANTITY.fullmatch(text) or text.startswith("-"):
        return None
    try:
        return dracel.parse_quantity(text)
    except (InvalidOperation, dracel.CelError, ValueError):
        return None


def resource_problems(values: dict[str, str]) -> dict[str, list[str]]:
    """cpu_request, cpu_limit, memory_request, memory_limit: each a quantity or empty; a
    request no more than its limit (the API server refuses it otherwise)."""
    errors: dict[str, list[str]] = {}
    parsed: dict[str, Decimal] = {}
    for name in RESOURCE_FIELDS:
        text = (values.get(name) or "").strip()
        if not text:
            continue
        value = quantity_value(text)
        if value is None:
            example = "500m, 2" if name.startswith("cpu") else "512Mi, 16Gi"
            errors[name] = [
                _("%(value)r is not a Kubernetes quantity (e.g. %(example)s).")
                % {"value": text, "example": example}
            ]
        else:
            parsed[name] = value
    for resource in ("cpu", "memory"):
        request, limit = parsed.get(f"{resource}_request"), parsed.get(f"{resource}_limit")
        if request is not None and limit is not None and request > limit:
            errors.setdefault(f"{resource}_request", []).append(
                _("The request is more than the limit.")
            )
    return errors


def port_problems(ports: Any) -> list[str]:
    if not isinstance(ports, list):
        return [_("Give the ports as a list of numbers.")]
    problems = []
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int):
            problems.append(_("%(port)r is not a port number.") % {"port": port})
        elif not PORT_MIN <= port <= PORT_MAX:
            problems.append(
                _("Port %(port)d is out of range (%(min)d to %(max)d).")
                % {"port": port, "min": PORT_MIN, "max": PORT_MAX}
            )
    if len(set(ports)) != len(ports) and not problems:
        problems.append(_("A port is listed twice."))
    return problems


def parse_ports(text: str) -> list[int] | list[Any]:
    """Ports typed in a form ("8888, 6006"); what is not a number is kept for the check."""
    ports: list[Any] = []
    for word in re.split(r"[,\s]+", (text or "").strip()):
        if word:
            ports.append(int(word) if word.isdigit() else word)
    return ports


def resources_of(values: dict[str, str]) -> dict[str, dict[str, str]]:
    """{"requests": {...}, "limits": {...}} of the checked resource fields."""
    resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for name in RESOURCE_FIELDS:
        text = (values.get(name) or "").strip()
        if text:
            resource, kind = name.split("_")
            resources[f"{kind}s"][resource] = text
    return resources


def validate_workload_fields(
    *,
    image: str,
    command: str,
    args: str,
    env: Any,
    ports: Any,
    resources: dict[str, str],
) -> None:
    """Every field error at once, so a form shows them all next to their fields."""
    errors: dict[str, list[str]] = {}
    if problem := image_problem(image):
        errors["image"] = [problem]
    for field, text in (("command", command), ("args", args)):
        try:
            shell_words(text, field)
        except ValidationError as error:
            errors.update(error.message_dict)
    if problems := env_problems(env):
        errors["env"] = problems
    if problems := port_problems(ports):
        errors["ports"] = problems
    errors.update(resource_problems(resources))
    if errors:
        raise ValidationError(errors)
