"""The registry of kinds kubesim serves: the table of every Kind (kind.py: names, versions,
conversion, defaults, validation) and the look-ups over it.

Every object is stored in its storage form (core kinds as v1, resource.k8s.io kinds in the
v1 shape); `to_storage` / `from_storage` convert a request or response body per version.
"""

from collections.abc import Callable, Iterable
from typing import Any

from kubesim.registry import events
from kubesim.registry.kinds import apps as kinds_apps
from kubesim.registry.kinds import configmaps as kinds_configmaps
from kubesim.registry.kinds import core as kinds_core
from kubesim.registry.kinds import quota as quota_validation
from kubesim.registry.kinds import rbac as kinds_rbac
from kubesim.registry.kinds import resource as kinds_resource
from kubesim.registry.kinds import secrets as kinds_secrets
from kubesim.registry.kinds.kind import (
    ALPHA_VERSION,
    CORE_FIELD_SELECTORS,
    EVENT_FIELD_SELECTORS,
    POD_FIELD_SELECTORS,
    RESOURCE_GROUP,
    Kind,
)
from kubesim.registry.validation import FieldError, invalid_message

__all__ = [
    "ALPHA_VERSION",
    "KINDS",
    "FieldError",
    "Kind",
    "find_kind",
    "invalid_message",
    "kind_for",
    "kinds_in",
]


def _core(plural: str, kind: str, namespaced: bool, **extra: Any) -> Kind:
    return Kind(
        group="", plural=plural, singular=kind.lower(), kind=kind, namespaced=namespaced, **extra
    )


def _resource(plural: str, kind: str, namespaced: bool, **extra: Any) -> Kind:
    return Kind(
        group=RESOURCE_GROUP,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        **extra,
    )


def _rbac(plural: str, kind: str, namespaced: bool, validator: Callable) -> Kind:
    group = kinds_rbac.GROUP
    singular = kind.lower()
    return Kind(group, plural, singular, kind, namespaced, validator=validator)


_ALL = (
    _core(
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=("finalize", "status"),
        field_selectors=("metadata.name", "status.phase"),
        defaulter=kinds_core.default_namespace,
        validator=kinds_core.validate_namespace,
    ),
    _core(
        "nodes",
        "Node",
        False,
        short_names=("no",),
        subresources=("status",),
        field_selectors=("metadata.name", "spec.unschedulable"),
    ),
    _core(
        "pods",
        "Pod",
        True,
        short_names=("po",),
        subresources=("status", "log", "binding", "eviction", "proxy"),
        field_selectors=POD_FIELD_SELECTORS,
        defaulter=kinds_core.default_pod,
        decoding_defaulter=kinds_core.default_pod_as_decoded,
        creation_admission=kinds_core.admit_pod,
        validator=kinds_core.validate_pod,
    ),
    _core(
        "events",
        "Event",
        True,
        short_names=("ev",),
        field_selectors=EVENT_FIELD_SELECTORS,
    ),
    Kind(
        events.GROUP,
        "events",
        "event",
        "Event",
        True,
        short_names=("ev",),
        shares_storage_of=("", "events"),
        codec=events,
    ),
    _core(
        "resourcequotas",
        "ResourceQuota",
        True,
        short_names=("quota",),
        subresources=("status",),
        validator=quota_validation.validate_resource_quota,
    ),
    _core(
        "configmaps",
        "ConfigMap",
        True,
        short_names=("cm",),
        validator=kinds_configmaps.validate_config_map,
    ),
    _core(
        "secrets",
        "Secret",
        True,
        field_selectors=(*CORE_FIELD_SELECTORS, "type"),
        defaulter=kinds_secrets.default_secret,
        validator=kinds_secrets.validate_secret,
    ),
    _resource(
        "deviceclasses",
        "DeviceClass",
        False,
        validator=kinds_resource.validate_device_class,
    ),
    _resource(
        "resourceslices",
        "ResourceSlice",
        False,
        field_selectors=("metadata.name", "spec.nodeName", "spec.driver"),
        defaulter=kinds_resource.default_slice,
        validator=kinds_resource.validate_slice,
    ),
    _resource(
        "devicetaintrules",
        "DeviceTaintRule",
        False,
        defaulter=kinds_resource.default_taint_rule,
        validator=kinds_resource.validate_taint_rule,
        only_version=ALPHA_VERSION,
    ),
    _resource(
        "resourceclaims",
        "ResourceClaim",
        True,
        subresources=("status",),
        defaulter=kinds_resource.default_claim,
        validator=kinds_resource.validate_claim,
    ),
    _resource(
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        True,
        defaulter=kinds_resource.default_template,
        validator=kinds_resource.validate_template,
    ),
    _core(
        "serviceaccounts",
        "ServiceAccount",
        True,
        short_names=("sa",),
        subresources=("token",),
        validator=kinds_rbac.validate_service_account,
    ),
    _rbac("roles", "Role", True, kinds_rbac.validate_role),
    _rbac("rolebindings", "RoleBinding", True, kinds_rbac.validate_role_binding),
    _rbac("clusterroles", "ClusterRole", False, kinds_rbac.validate_cluster_role),
    _rbac(
        "clusterrolebindings", "ClusterRoleBinding", False, kinds_rbac.validate_cluster_role_binding
    ),
)

# The portal's own workloads (deploy/), stored and validated; only Jobs run (controllers/jobs.py).
_WORKLOADS = (
    Kind(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        True,
        short_names=("deploy",),
        subresources=("status",),
        defaulter=kinds_apps.default_deployment,
        validator=kinds_apps.validate_deployment,
    ),
    Kind(
        "batch",
        "jobs",
        "job",
        "Job",
        True,
        subresources=("status",),
        defaulter=kinds_apps.default_job,
        validator=kinds_apps.validate_job,
        from_uid=kinds_apps.generate_job_selector,
    ),
    _core(
        "services",
        "Service",
        True,
        short_names=("svc",),
        subresources=("status", "proxy"),
        defaulter=kinds_apps.default_service,
        validator=kinds_apps.validate_service,
    ),
    Kind(
        "networking.k8s.io",
        "ingresses",
        "ingress",
        "Ingress",
        True,
        short_names=("ing",),
        subresources=("status",),
        defaulter=kinds_apps.default_ingress,
        validator=kinds_apps.validate_ingress,
    ),
    Kind(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=("status",),
        defaulter=kinds_apps.default_pdb,
        validator=kinds_apps.validate_pdb,
    ),
)

KINDS: dict[tuple[str, str], Kind] = {(k.group, k.plural): k for k in (*_ALL, *_WORKLOADS)}
from kubesim.registry.kinds import kueue as kinds_kueue  # noqa: E402 - its kinds extend Kind

KINDS.update({(k.group, k.plural): k for k in kinds_kueue.CUSTOM_KINDS})  # served only when enabled


def kind_for(group: str, plural: str) -> Kind:
    """The Kind serving `plural` in `group` ("" for core); KeyError if none."""
    return KINDS[(group, plural)]


def find_kind(group: str, kind: str) -> Kind | None:
    """The Kind whose `kind` name (e.g. "ResourceClaim") lives in `group`."""
    for candidate in KINDS.values():
        if candidate.group == group and candidate.kind == kind:
            return candidate
    return None


def kinds_in(group: str) -> Iterable[Kind]:
    return [k for k in KINDS.values() if k.group == group]
