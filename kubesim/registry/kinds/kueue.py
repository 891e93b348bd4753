"""Kueue's kinds (kueue.x-k8s.io/v1beta2): ResourceFlavor and ClusterQueue (cluster-scoped),
LocalQueue and Workload (namespaced), served as the CustomResourceDefinitions Kueue installs
when the topology says the cluster runs Kueue (`kueue:`, docs/kubesim-topology.md).

Objects are checked the way the API server checks a custom resource: unknown fields pruned
(or refused with fieldValidation=Strict), the schema's defaults applied, then its structural
rules (type, required, enum, pattern, lengths, bounds, item counts) and its
x-kubernetes-validations CEL rules, transition rules (oldSelf) on update only. The schemas
are upstream's (data/kueue-v1beta2.json names the commit), trimmed as it says: the Workload's
embedded PodTemplateSpec is not checked against the schema. No Kueue controller runs:
Workloads are created and admitted by whoever plays Kueue (tests/fixtures/kueue.py).
Not done: v1beta1 (upstream serves it too, converted by Kueue's webhook), Kueue's
webhooks (its defaulting and validation beyond the CRD), WorkloadPriorityClass, Cohort,
Topology, AdmissionCheck and MultiKueue kinds.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

import celpy

from kubesim.registry.kinds import Kind
from kubesim.registry.validation import (
    INVALID,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    UNSUPPORTED,
    FieldError,
    metadata_name_errors,
    render_value,
)

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
SCHEMA_FILE = "kueue-v1beta2.json"
TYPE_ERROR = "in body must be of type"


@functools.cache
def schemas() -> dict[str, dict]:
    """Kind -> its trimmed upstream openAPIV3Schema."""
    text = (resources.files("kubesim.registry.kinds") / "data" / SCHEMA_FILE).read_text()
    return json.loads(text)["kinds"]


# -- defaults and pruning ------------------------------------------------------------


def _defaulted(value: Any, schema: dict) -> None:
    if isinstance(value, list) and "items" in schema:
        for item in value:
            _defaulted(item, schema["items"])
    if not isinstance(value, dict):
        return
    properties = schema.get("properties") or {}
    for key, child in properties.items():
        if key not in value and "default" in child:
            value[key] = json.loads(json.dumps(child["default"]))
        if key in value:
            _defaulted(value[key], child)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, item in value.items():
            if key not in properties:
                _defaulted(item, extra)


def _unknown(value: Any, schema: dict, path: str) -> list[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, list) and "items" in schema:
        found = []
        for index, item in enumerate(value):
            found += _unknown(item, schema["items"], f"{path}[{index}]")
        return found
    if not isinstance(value, dict) or schema.get("type") != "object":
        return []
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    found = []
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key in properties:
            found += _unknown(item, properties[key], child)
        elif isinstance(extra, dict):
            found += _unknown(item, extra, child)
        elif not extra:
            found.append(child)
    return found


# -- structural validation -------------------------------------------------------------

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def _type_ok(value: Any, declared: str) -> bool:
    if isinstance(value, bool):
        return declared == "boolean"
    return isinstance(value, _TYPES.get(declared, object))


def _json_type(value: Any) -> str:
    for name in ("boolean", "string", "integer", "number", "array", "object"):
        if _type_ok(value, name):
            return name
    return "null"


def _body_error(path: str, value: Any, rule: str) -> FieldError:
    """A schema error worded as apiextensions' validator words it ("in body ...")."""
    return FieldError(INVALID, path, value, f"{path} in body {rule}")


def _scalar_errors(value: Any, schema: dict, path: str) -> list[FieldError]:
    found = []
    if "enum" in schema and value not in schema["enum"]:
        listed = ", ".join(render_value(option) for option in schema["enum"])
        found.append(FieldError(UNSUPPORTED, path, value, f"supported values: {listed}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(
                FieldError(
                    TOO_LONG, path, detail=f"may not be more than {schema['maxLength']} bytes"
                )
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            found.append(
                _body_error(path, value, f"should be at least {schema['minLength']} chars long")
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(_body_error(path, value, f"should match '{schema['pattern']}'"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(
                _body_error(path, value, f"should be greater than or equal to {schema['minimum']}")
            )
        if "maximum" in schema and value > schema["maximum"]:
            found.append(
                _body_error(path, value, f"should be less than or equal to {schema['maximum']}")
            )
    return found


def _collection_errors(value: Any, schema: dict, path: str) -> list[FieldError]:
    found = []
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            detail = f"must have at most {schema['maxItems']} items"
            found.append(FieldError(TOO_MANY, path, len(value), detail))
        if "minItems" in schema and len(value) < schema["minItems"]:
            found.append(
                _body_error(path, value, f"should have at least {schema['minItems']} items")
            )
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                found.append(FieldError(REQUIRED, f"{path}.{key}" if path else key))
    return found


def _structural_errors(value: Any, schema: dict, path: str) -> list[FieldError]:
    if value is None and schema.get("nullable"):
        return []
    declared = schema.get("type")
    if declared and not _type_ok(value, declared):
        detail = f"{path} {TYPE_ERROR} {declared}: {render_value(_json_type(value))}"
        return [FieldError(INVALID, path, _json_type(value), detail)]
    found = _scalar_errors(value, schema, path) + _collection_errors(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += _structural_errors(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict):
        properties, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                found += _structural_errors(item, child, f"{path}.{key}" if path else key)
    return found


# -- CEL rules (x-kubernetes-validations) ---------------------------------------------


@functools.cache
def _program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _rule_holds(rule: str, value: Any, old: Any) -> bool:
    """Whether a rule holds; a rule cel-python cannot run (none of Kueue's today) passes."""
    activation = {"self": celpy.json_to_cel(value)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        return bool(_program(rule).evaluate(activation))
    except Exception:  # an unsupported construct is not the object's fault
        return True


def _rule_errors(value: Any, old: Any, schema: dict, path: str) -> list[FieldError]:
    found = []
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = validation["rule"]
        transition = "oldSelf" in rule
        if transition and old is None:
            continue
        if not _rule_holds(rule, value, old if transition else None):
            message = validation.get("message") or f"failed rule: {rule}"
            shown = "object" if isinstance(value, dict) else value
            found.append(FieldError(INVALID, path or "<nil>", shown, message))
    return found


def _cel_errors(value: Any, old: Any, schema: dict, path: str) -> list[FieldError]:
    found = _rule_errors(value, old, schema, path)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            # Items of a list-type map are matched to old ones by key; others are not correlated.
            found += _cel_errors(item, None, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            if key in properties:
                before = old.get(key) if isinstance(old, dict) else None
                found += _cel_errors(
                    item, before, properties[key], f"{path}.{key}" if path else key
                )
    return found


def _without_metadata(obj: dict) -> dict:
    return {key: value for key, value in obj.items() if key != "metadata"}


@dataclass(frozen=True)
class CustomKind(Kind):
    """A kind served from a CRD's schema rather than Kubernetes' own definitions."""

    custom: ClassVar[bool] = True  # no strategic merge patch (handlers.patch_object)

    def apply_defaults(self, obj: dict) -> None:
        _defaulted(obj, schemas()[self.kind])

    def apply_decoding_defaults(self, obj: dict) -> None:
        self.apply_defaults(obj)

    def validate(self, obj: dict, old: dict | None = None) -> list[FieldError]:
        schema = schemas()[self.kind]
        body = _without_metadata(obj)
        found = metadata_name_errors(obj) + _structural_errors(body, schema, "")
        if any(TYPE_ERROR in error.detail for error in found):
            return found  # apiextensions' hasBlockingErr: rules do not run on the wrong types
        return found + _cel_errors(body, _without_metadata(old) if old else None, schema, "")

    def unknown_fields(self, obj: dict, version: str, k8s_version: str = "") -> list[str]:
        body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
        return [path for path in _unknown(_without_metadata(body), schemas()[self.kind], "")]


def _kind(plural: str, kind: str, namespaced: bool, short: tuple[str, ...], status: bool) -> Kind:
    return CustomKind(
        GROUP,
        plural,
        kind.lower(),
        kind,
        namespaced,
        short_names=short,
        subresources=("status",) if status else (),
        only_version=VERSION,
    )


CUSTOM_KINDS: tuple[Kind, ...] = (
    _kind("resourceflavors", "ResourceFlavor", False, ("flavor", "flavors", "rf"), False),
    _kind("clusterqueues", "ClusterQueue", False, ("cq",), True),
    _kind("localqueues", "LocalQueue", True, ("queue", "queues", "lq"), True),
    _kind("workloads", "Workload", True, ("kwl", "kueueworkload", "kueueworkloads"), True),
)


def served_groups(config: dict | None) -> dict[str, list[str]]:
    """The API groups a topology's `kueue:` section serves (none without it)."""
    if config is None:
        return {}
    groups = {GROUP: [VERSION]}
    if config.get("visibility", True):
        groups[VISIBILITY_GROUP] = [VERSION]
    return groups
