"""The Kind: how kubesim serves one resource (its names, versions, field selectors, the
conversion between its versions and storage, its defaults, admission and validation)."""

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.registry import conversion
from kubesim.registry.kinds import core as kinds_core
from kubesim.registry.validation import (
    DEFAULT_K8S_VERSION,
    FieldError,
    type_errors,
    unknown_fields,
)

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
