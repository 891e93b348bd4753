"""Field errors rendered like the real API server, name rules, and unknown-field detection."""

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

REQUIRED = "Required value"
INVALID = "Invalid value"
UNSUPPORTED = "Unsupported value"
DUPLICATE = "Duplicate value"
FORBIDDEN = "Forbidden"
TOO_LONG = "Too long"
TOO_MANY = "Too many"
NOT_FOUND = "Not found"

REASONS = {
    REQUIRED: "FieldValueRequired",
    INVALID: "FieldValueInvalid",
    UNSUPPORTED: "FieldValueNotSupported",
    DUPLICATE: "FieldValueDuplicate",
    FORBIDDEN: "FieldValueForbidden",
    TOO_LONG: "FieldValueTooLong",
    TOO_MANY: "FieldValueTooMany",
    NOT_FOUND: "FieldValueNotFound",
}

# Upstream prints no value for these types (apimachinery field/errors.go ErrorBody).
_VALUELESS = {REQUIRED, FORBIDDEN, TOO_LONG}


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


class Printed(str):
    """A value already printed the way upstream prints it (e.g. a Go struct)."""


def render_value(value: Any) -> str:
    """A bad value printed as Go's %v / %q would print it in a field error."""
    if isinstance(value, Printed):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class FieldError:
    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """The message without the field path, as used in a Status cause."""
        text = self.type
        if self.type not in _VALUELESS and self.value is not OMIT:
            text += f": {render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def message(self) -> str:
        return f"{self.field}: {self.body()}"

    def reason(self) -> str:
        return REASONS[self.type]

    def cause(self) -> dict:
        return {"reason": self.reason(), "message": self.body(), "field": self.field}


def aggregate_message(errors: list[FieldError]) -> str:
    """Several errors joined the way utilerrors.NewAggregate prints them."""
    if len(errors) == 1:
        return errors[0].message()
    return "[" + ", ".join(error.message() for error in errors) + "]"


def invalid_message(kind: str, group: str, name: str, errors: list[FieldError]) -> str:
    qualified = f"{kind}.{group}" if group else kind
    return f'{qualified} "{name}" is invalid: {aggregate_message(errors)}'


DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def dns_label_errors(value: Any, field: str) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return [FieldError(REQUIRED, field)]
    errors = []
    if len(value) > 63:
        errors.append(FieldError(INVALID, field, value, "must be no more than 63 characters"))
    if not DNS1123_LABEL.match(value):
        errors.append(FieldError(INVALID, field, value, LABEL_MSG))
    return errors


def dns_subdomain_errors(value: Any, field: str) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return [FieldError(REQUIRED, field)]
    errors = []
    if len(value) > 253:
        errors.append(FieldError(INVALID, field, value, "must be no more than 253 characters"))
    if not DNS1123_SUBDOMAIN.match(value):
        errors.append(FieldError(INVALID, field, value, SUBDOMAIN_MSG))
    return errors


def metadata_name_errors(obj: dict, *, label: bool = False) -> list[FieldError]:
    """metadata.name checked as a DNS-1123 subdomain (or label, e.g. for namespaces)."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name and metadata.get("generateName"):
        return []
    if not name:
        return [FieldError(REQUIRED, "metadata.name", detail="name or generateName is required")]
    check = dns_label_errors if label else dns_subdomain_errors
    return check(name, "metadata.name")


DEFAULT_K8S_VERSION = "1.34.1"


def schema_release(version: str, k8s_version: str = DEFAULT_K8S_VERSION) -> str:
    """The upstream schemas of the release served, as `kubernetes-validate` names them
    (1.33 to 1.37; resource.k8s.io/v1 exists from 1.34 on)."""
    minor = int(k8s_version.lstrip("v").split(".")[1])
    lowest = 34 if version == "v1" else 33
    return f"v1.{min(max(minor, lowest), 37)}.0"


@functools.cache
def upstream_definitions(release: str) -> dict:
    """The `$defs` of one release's strict schemas in `kubernetes-validate`."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = root / f"{release}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


# API group -> the package of its upstream definitions (io.k8s.api.<package>.<version>.<Kind>).
DEFINITION_PACKAGES = {
    "resource.k8s.io": "resource",
    "rbac.authorization.k8s.io": "rbac",
    "authentication.k8s.io": "authentication",
    "authorization.k8s.io": "authorization",
    "events.k8s.io": "events",
    "apps": "apps",
    "batch": "batch",
    "networking.k8s.io": "networking",
    "policy": "policy",
}


def definition_name(group: str, version: str, kind: str) -> str:
    return f"io.k8s.api.{DEFINITION_PACKAGES.get(group, 'core')}.{version}.{kind}"


def _definition_name(api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    return definition_name(group, version, kind)


def _resolve(schema: dict, definitions: dict) -> dict:
    while "$ref" in schema:
        schema = definitions[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _walk_unknown(value: Any, schema: dict, path: str, definitions: dict) -> list[str]:
    schema = _resolve(schema, definitions)
    if isinstance(value, list) and "items" in schema:
        found = []
        for index, item in enumerate(value):
            found += _walk_unknown(item, schema["items"], f"{path}[{index}]", definitions)
        return found
    if not isinstance(value, dict):
        return []
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    found = []
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if properties is not None and key in properties:
            found += _walk_unknown(item, properties[key], child, definitions)
        elif isinstance(extra, dict):
            found += _walk_unknown(item, extra, child, definitions)
        elif properties is not None or extra is False:
            found.append(child)
    return found


def unknown_fields(obj: dict, version: str, k8s_version: str = DEFAULT_K8S_VERSION) -> list[str]:
    """Paths of the fields in `obj` (request form) that its schema does not know."""
    api_version = obj.get("apiVersion") or ""
    definitions = upstream_definitions(schema_release(version, k8s_version))
    schema = definitions.get(_definition_name(api_version, obj.get("kind") or ""))
    if schema is None:
        return []
    return _walk_unknown(obj, schema, "", definitions)


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def _allowed_types(schema: dict) -> list[str]:
    if "oneOf" in schema:
        return [t for option in schema["oneOf"] for t in _allowed_types(option)]
    declared = schema.get("type")
    if not isinstance(declared, str | list):
        return []
    return [declared] if isinstance(declared, str) else declared


def _type_ok(value: Any, allowed: list[str]) -> bool:
    if not allowed:
        return True
    if isinstance(value, bool):
        return "boolean" in allowed
    return any(isinstance(value, _JSON_TYPES[name]) for name in allowed if name in _JSON_TYPES)


def _children(value: Any, schema: dict, path: str) -> list[tuple[Any, dict, str]]:
    if isinstance(value, list) and "items" in schema:
        return [(item, schema["items"], f"{path}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return []
    properties, extra = schema.get("properties") or {}, schema.get("additionalProperties")
    children = []
    for key, item in value.items():
        child = properties.get(key, extra if isinstance(extra, dict) else None)
        if child is not None:
            children.append((item, child, f"{path}.{key}" if path else key))
    return children


def _walk_types(value: Any, schema: dict, path: str, definitions: dict) -> list[FieldError]:
    schema = _resolve(schema, definitions)
    allowed = [t for t in _allowed_types(schema) if t != "null"]
    if not _type_ok(value, [*allowed, "null"] if allowed else []):
        return [FieldError(INVALID, path, value, f"must be of type {' or '.join(allowed)}")]
    errors = []
    for item, child, child_path in _children(value, schema, path):
        errors += _walk_types(item, child, child_path, definitions)
    return errors


def type_errors(obj: dict, version: str = "v1") -> list[FieldError]:
    """Values of the wrong JSON type (a string where a list belongs...), by the upstream schema."""
    definitions = upstream_definitions(schema_release(version))
    schema = definitions.get(_definition_name(obj.get("apiVersion") or "", obj.get("kind") or ""))
    if schema is None:
        return []
    return _walk_types(obj, schema, "", definitions)
