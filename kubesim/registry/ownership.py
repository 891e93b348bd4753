"""The managedFields that kubesim's controllers leave, as the API requests of the real
kube-scheduler and kube-controller-manager would: they write the store directly, so the field
manager of the HTTP layer never sees their writes."""

from __future__ import annotations

from typing import Any

from kubesim.registry.apply import record_update, server_side_apply

SCHEDULER = "kube-scheduler"
CONTROLLER_MANAGER = "kube-controller-manager"
KUBELET = "kubelet"
# The resourceclaim controller applies a Pod's resourceClaimStatuses under its own name.
CLAIM_CONTROLLER = "ResourceClaimController"


def record_write(
    kind: Any, old: dict | None, new: dict, manager: str, subresource: str = ""
) -> None:
    """`new` gets the managedFields of an Update (or create, without `old`) by `manager`."""
    if subresource:
        reset: tuple[str, ...] = ("f:spec",)
    else:
        reset = ("f:status",) if "status" in kind.subresources else ()
    if kind.plural == "namespaces" and old is None:
        reset += ("f:spec",)  # PrepareForCreate sets spec.finalizers
    record_update(
        old,
        new,
        manager=manager,
        api_version=kind.api_version_storage,
        subresource=subresource,
        reset=reset,
    )


def record_status_apply(kind: Any, old: dict, new: dict, config: dict, manager: str) -> None:
    """`new` gets the managedFields of `manager` applying `config` to the status of `old`."""
    applied = server_side_apply(
        old,
        config,
        manager=manager,
        force=True,
        api_version=kind.api_version_storage,
        subresource="status",
    )
    new["metadata"]["managedFields"] = applied["metadata"]["managedFields"]
