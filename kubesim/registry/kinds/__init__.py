"""The registry of kinds kubesim serves: names, versions, conversion, defaults, validation.

Every object is stored in its storage form (core kinds as v1, resource.k8s.io kinds in the
v1 shape); `to_storage` / `from_storage` convert a request or response body per version.
"""

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesim.registry import conversion, events
from kubesim.registry.kinds import apps as kinds_apps
from kubesim.registry.kinds import configmaps as kinds_configmaps
from kubesim.registry.kinds import core as kinds_core
from kubesim.registry.kinds import quota as quota_validation
from kubesim.registry.kinds import rbac as kinds_rbac
from kubesim.registry.kinds import resource as kinds_resource
from kubesim.registry.kinds import secrets as kinds_secrets
from kubesim.registry.validation import (
    DEFAULT_K8S_VERSION,
    FieldError,
    invalid_message,
    type_errors,
    unknown_fields,
)

__all__ = ["KINDS", "FieldError", "Kind", "find_kind", "invalid_message", "kind_for"]

RESOURCE_GROUP = conversion.GROUP
CORE_FIELD_SELECTORS = ("metadata.name", "metadata.namespace")
# The field labels of Pods (the v1 conversion's list; spec.host is the old spec.nodeName).
POD_FIELD_SELECTORS = (
    *CORE_FIELD_SELECTORS,
    "spec.nodeName",
    "spec.host",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
)
# The field labels the API server supports for events (kubectl describe uses involvedObject.*).
EVENT_FIELD_SELECTORS = (
    *CORE_FIELD_SELECTORS,
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "involvedObject.kind",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


def _configured_versions(config: Any) -> list[str]:
    versions = getattr(config, "served_versions", config)
    if isinstance(versions, str):
        versions = versions.split(",")
    return list(versions or conversion.VERSIONS)


def _served_from_config(config: Any) -> list[str]:
    configured = set(_configured_versions(config))
    return [v for v in conversion.VERSIONS if v in configured]


# resource.k8s.io/v1alpha3 holds only DeviceTaintRule in 1.34 and, as an alpha version, is
# served only when enabled (--runtime-config=resource.k8s.io/v1alpha3=true): kubesim serves it
# when `served_versions` names it.
ALPHA_VERSION = "v1alpha3"


@dataclass(frozen=True)
class Kind:
    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    field_selectors: tuple[str, ...] = CORE_FIELD_SELECTORS
    defaulter: Callable[[dict], None] = field(default=kinds_core.default_nothing, repr=False)
    # The decoder's part of `defaulter` where admission plugins add the rest.
    decoding_defaulter: Callable[[dict], None] | None = field(default=None, repr=False)
    creation_admission: Callable[[dict], None] = field(
        default=kinds_core.default_nothing, repr=False
    )
    validator: Callable[[dict, dict | None], list[FieldError]] = field(
        default=kinds_core.validate_named, repr=False
    )
    # Another resource whose objects this one serves (group, plural), and the module that
    # converts between the two forms (`to_storage`, `from_storage`): events.k8s.io Events.
    shares_storage_of: tuple[str, str] | None = None
    # What the strategy derives from the uid the API server gives a new object.
    from_uid: Callable[[dict], None] | None = field(default=None, repr=False)
    codec: Any = field(default=None, repr=False)
    # The one version of a kind outside the group's common ones (DeviceTaintRule: v1alpha3).
    only_version: str = ""

    @property
    def storage_key(self) -> tuple[str, str]:
        return self.shares_storage_of or (self.group, self.plural)

    @property
    def version_storage(self) -> str:
        return "v1"

    @property
    def api_version_storage(self) -> str:
        return f"{self.group}/{self.only_version or 'v1'}" if self.group else "v1"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def served_versions(self, config: Any = None) -> list[str]:
        """Versions served for this kind; `config` has `served_versions` (or is that list)."""
        if self.only_version:
            configured = _configured_versions(config)
            return [self.only_version] if self.only_version in configured else []
        if self.group != RESOURCE_GROUP:
            return ["v1"]
        return _served_from_config(config)

    def to_storage(self, obj: dict, version: str) -> dict:
        """The storage form of a body the client sent in `version`."""
        if self.codec:
            return self.codec.to_storage(copy.deepcopy(obj))
        return self._converted(obj, version, conversion.to_storage)

    def from_storage(self, obj: dict, version: str) -> dict:
        """The stored object as served in `version`."""
        if self.codec:
            return self.codec.from_storage(copy.deepcopy(obj))
        return self._converted(obj, version, conversion.from_storage)

    def _converted(self, obj: dict, version: str, convert: Callable) -> dict:
        """A copy of `obj` converted by `convert`; other groups than resource.k8s.io have v1."""
        if self.only_version:
            converted = copy.deepcopy(obj)
            converted["apiVersion"] = self.api_version(self.only_version)
        elif self.group == RESOURCE_GROUP:
            converted = convert(obj, self.kind, version)
        else:
            converted = copy.deepcopy(obj)
            converted["apiVersion"] = self.api_version("v1")
        converted["kind"] = self.kind
        return converted

    def apply_defaults(self, obj: dict) -> None:
        """Fill in the defaults the API server sets (storage form, in place)."""
        self.defaulter(obj)

    def apply_decoding_defaults(self, obj: dict) -> None:
        """The defaults an object has when the field manager sees it, before admission."""
        (self.decoding_defaulter or self.defaulter)(obj)

    def admit_new(self, obj: dict) -> None:
        """What admission plugins add to an object being created (storage form, in place)."""
        self.creation_admission(obj)

    def validate(self, obj: dict, old: dict | None = None) -> list[FieldError]:
        """Field errors of `obj` (storage form); `old` is the stored object on update."""
        shape = {**obj, "apiVersion": self.api_version_storage, "kind": self.kind}
        return type_errors(shape) or self.validator(obj, old)

    def unknown_fields(
        self, obj: dict, version: str, k8s_version: str = DEFAULT_K8S_VERSION
    ) -> list[str]:
        """Paths of fields the upstream schema of `version` in that release does not know
        (request form)."""
        shaped = {**obj, "apiVersion": self.api_version(version)}
        return unknown_fields(shaped, version, k8s_version)


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
