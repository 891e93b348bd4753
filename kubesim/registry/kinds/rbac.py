"""Validation of ServiceAccounts and the rbac.authorization.k8s.io/v1 kinds, worded as upstream
(pkg/apis/rbac/validation/validation.go, pkg/apis/core/validation for ServiceAccount names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim.registry.validation import (
    INVALID,
    REQUIRED,
    UNSUPPORTED,
    FieldError,
    metadata_name_errors,
)

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


@dataclass(frozen=True)
class GoValueError(FieldError):
    """A field error whose bad value upstream prints with Go's %#v (a struct)."""

    go_value: str = ""

    def body(self) -> str:
        text = f"{self.type}: {self.go_value}"
        return f"{text}: {self.detail}" if self.detail else text


def _supported(field: str, value: Any, allowed: tuple[str, ...]) -> FieldError:
    listed = ", ".join(f'"{item}"' for item in allowed)
    return FieldError(UNSUPPORTED, field, value or "", f"supported values: {listed}")


def path_segment_errors(name: Any, field: str) -> list[FieldError]:
    """path.IsValidPathSegmentName, the rule for RBAC object names."""
    if name in (".", ".."):
        return [FieldError(INVALID, field, name, f"may not be '{name}'")]
    for bad in ("/", "%"):
        if isinstance(name, str) and bad in name:
            return [FieldError(INVALID, field, name, f"may not contain '{bad}'")]
    return []


def _rbac_name_errors(obj: dict) -> list[FieldError]:
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name and not metadata.get("generateName"):
        return [FieldError(REQUIRED, "metadata.name", detail="name or generateName is required")]
    return path_segment_errors(name, "metadata.name") if name else []


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def rule_errors(rule: dict, namespaced: bool, path: str) -> list[FieldError]:
    """ValidatePolicyRule."""
    errors = []
    if not _list(rule.get("verbs")):
        errors.append(
            FieldError(REQUIRED, f"{path}.verbs", detail="verbs must contain at least one value")
        )
    urls = _list(rule.get("nonResourceURLs"))
    if urls:
        if namespaced:
            detail = "namespaced rules cannot apply to non-resource URLs"
            errors.append(FieldError(INVALID, f"{path}.nonResourceURLs", urls, detail))
        if any(_list(rule.get(key)) for key in ("apiGroups", "resources", "resourceNames")):
            detail = "rules cannot apply to both regular resources and non-resource URLs"
            errors.append(FieldError(INVALID, f"{path}.nonResourceURLs", urls, detail))
        return errors
    if not _list(rule.get("apiGroups")):
        detail = "resource rules must supply at least one api group"
        errors.append(FieldError(REQUIRED, f"{path}.apiGroups", detail=detail))
    if not _list(rule.get("resources")):
        detail = "resource rules must supply at least one resource"
        errors.append(FieldError(REQUIRED, f"{path}.resources", detail=detail))
    return errors


def _role_errors(obj: dict, namespaced: bool) -> list[FieldError]:
    errors = _rbac_name_errors(obj)
    for index, rule in enumerate(_list(obj.get("rules"))):
        if isinstance(rule, dict):
            errors += rule_errors(rule, namespaced, f"rules[{index}]")
    return errors


def validate_role(obj: dict, old: dict | None) -> list[FieldError]:
    return _role_errors(obj, True)


def validate_cluster_role(obj: dict, old: dict | None) -> list[FieldError]:
    return _role_errors(obj, False)


def subject_errors(subject: dict, namespaced: bool, path: str) -> list[FieldError]:
    """ValidateRoleBindingSubject."""
    errors = []
    name, kind, group = subject.get("name"), subject.get("kind"), subject.get("apiGroup") or ""
    if not name:
        errors.append(FieldError(REQUIRED, f"{path}.name"))
    if kind == "ServiceAccount":
        if name:
            errors += [
                FieldError(INVALID, f"{path}.name", name, error.detail)
                for error in metadata_name_errors({"metadata": {"name": name}})
            ]
        if group:
            errors.append(_supported(f"{path}.apiGroup", group, ("",)))
        if not namespaced and not subject.get("namespace"):
            errors.append(FieldError(REQUIRED, f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != GROUP:
            errors.append(_supported(f"{path}.apiGroup", group, (GROUP,)))
    else:
        errors.append(_supported(f"{path}.kind", kind, SUBJECT_KINDS))
    return errors


def _role_ref_errors(ref: Any) -> list[FieldError]:
    ref = ref if isinstance(ref, dict) else {}
    errors = []
    if ref.get("apiGroup") != GROUP:
        errors.append(_supported("roleRef.apiGroup", ref.get("apiGroup"), (GROUP,)))
    if ref.get("kind") not in ("Role", "ClusterRole"):
        errors.append(_supported("roleRef.kind", ref.get("kind"), ("Role", "ClusterRole")))
    if not ref.get("name"):
        errors.append(FieldError(REQUIRED, "roleRef.name"))
    else:
        errors += path_segment_errors(ref["name"], "roleRef.name")
    return errors


def go_role_ref(ref: Any) -> str:
    """A RoleRef as Go's %#v prints the internal type."""
    ref = ref if isinstance(ref, dict) else {}
    parts = [f'{key}:"{ref.get(field) or ""}"' for key, field in _REF_FIELDS]
    return "rbac.RoleRef{" + ", ".join(parts) + "}"


_REF_FIELDS = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))


def _binding_errors(obj: dict, old: dict | None, namespaced: bool) -> list[FieldError]:
    errors = _rbac_name_errors(obj) + _role_ref_errors(obj.get("roleRef"))
    for index, subject in enumerate(_list(obj.get("subjects"))):
        if isinstance(subject, dict):
            errors += subject_errors(subject, namespaced, f"subjects[{index}]")
    if old is not None and old.get("roleRef") != obj.get("roleRef"):
        shown = go_role_ref(obj.get("roleRef"))
        errors.append(GoValueError(INVALID, "roleRef", None, "cannot change roleRef", shown))
    return errors


def validate_role_binding(obj: dict, old: dict | None) -> list[FieldError]:
    return _binding_errors(obj, old, True)


def validate_cluster_role_binding(obj: dict, old: dict | None) -> list[FieldError]:
    return _binding_errors(obj, old, False)


def validate_service_account(obj: dict, old: dict | None) -> list[FieldError]:
    return metadata_name_errors(obj)
