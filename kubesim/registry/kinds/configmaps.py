"""core/v1 ConfigMaps (ValidateConfigMap / ValidateConfigMapUpdate) and kube-controller-manager's
root-ca-cert-publisher, which puts the cluster's CA into `kube-root-ca.crt` in every namespace
(pkg/controller/certificates/rootcacertpublisher) and puts it back when it is changed or deleted.
"""

from __future__ import annotations

from typing import Any

from kubesim.base import errors
from kubesim.base.workqueue import NameQueueController
from kubesim.registry.kinds.secrets import IMMUTABLE, MAX_SECRET_SIZE, config_key_errors
from kubesim.registry.store import now_rfc3339
from kubesim.registry.validation import (
    FORBIDDEN,
    INVALID,
    TOO_LONG,
    FieldError,
    metadata_name_errors,
)

ROOT_CA = "kube-root-ca.crt"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
ANNOTATION = {"kubernetes.io/description": DESCRIPTION}


def _content_errors(obj: dict) -> list[FieldError]:
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    found, total = [], 0
    for key, value in data.items():
        found += config_key_errors("data", key)
        if key in binary:
            detail = "duplicate of key present in binaryData"
            found.append(FieldError(INVALID, f"data[{key}]", key, detail))
        total += len(str(value).encode())
    for key, value in binary.items():
        found += config_key_errors("binaryData", key)
        total += len(str(value)) * 3 // 4  # base64 in JSON, bytes once decoded
    if total > MAX_SECRET_SIZE:
        detail = f"may not be more than {MAX_SECRET_SIZE} bytes"
        found.append(FieldError(TOO_LONG, "", detail=detail))
    return found


def validate_config_map(obj: dict, old: dict | None) -> list[FieldError]:
    found = metadata_name_errors(obj)
    if old is None or old.get("immutable") is not True:
        return found + _content_errors(obj)
    if obj.get("immutable") is not True:
        found.append(FieldError(FORBIDDEN, "immutable", detail=IMMUTABLE))
    for bag in ("data", "binaryData"):
        if obj.get(bag) != old.get(bag):
            found.append(FieldError(FORBIDDEN, bag, detail=IMMUTABLE))
    return found


def root_ca_config_map(namespace: str, ca_pem: str) -> dict[str, Any]:
    """The ConfigMap as the publisher creates it (its managedFields entry included)."""
    fields = {
        "f:data": {".": {}, f"f:{'ca.crt'}": {}},
        "f:metadata": {"f:annotations": {".": {}, "f:kubernetes.io/description": {}}},
    }
    managed = {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": now_rfc3339(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    metadata = {
        "name": ROOT_CA,
        "namespace": namespace,
        "annotations": dict(ANNOTATION),
        "managedFields": [managed],
    }
    data = {"ca.crt": ca_pem}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


class RootCAPublisher(NameQueueController):
    """Creates `kube-root-ca.crt` in each namespace, and again when it is deleted or changed."""

    thread_name = "kubesim-root-ca"

    def __init__(self, store: Any, kinds: dict, ca_pem: bytes) -> None:
        self.namespaces = kinds[("", "namespaces")]
        self.config_maps = kinds[("", "configmaps")]
        self.ca_pem = ca_pem.decode()
        super().__init__(store)

    def initial_names(self) -> list[str]:
        return [ns["metadata"]["name"] for ns in self.store.list(self.namespaces, copy=False)[0]]

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        metadata = obj.get("metadata", {})
        if ref.plural == "namespaces" and event in ("ADDED", "MODIFIED"):
            self.enqueue(metadata["name"])
        elif ref.plural == "configmaps" and metadata.get("name") == ROOT_CA:
            self.enqueue(metadata.get("namespace", ""))

    def sync(self, name: str) -> None:
        self._ensure(name)

    def _ensure(self, namespace: str) -> None:
        ns = self.store.get(self.namespaces, None, namespace, copy=False)
        if ns["metadata"].get("deletionTimestamp"):
            return
        wanted = root_ca_config_map(namespace, self.ca_pem)
        try:
            current = self.store.get(self.config_maps, namespace, ROOT_CA)
        except errors.ApiError:
            self.store.create(self.config_maps, wanted)
            return
        annotations = current["metadata"].get("annotations") or {}
        if current.get("data") == wanted["data"] and annotations == {**annotations, **ANNOTATION}:
            return
        current["data"] = wanted["data"]
        current["metadata"]["annotations"] = {**annotations, **ANNOTATION}
        self.store.update(self.config_maps, current)
