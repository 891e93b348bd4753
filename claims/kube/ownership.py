"""The portal changes or deletes only what it made.

An object is the portal's when it carries every label the portal would put on it: the
managed-by and instance labels *and* the id of the request it belongs to. Anything else with
the same name (another team's namespace, a claim made with kubectl, an object of another
portal installation) is never adopted, relabelled or deleted.
"""

from __future__ import annotations

from typing import Any

from claims.kube.errors import PermanentKubeError, TransientKubeError
from claims.kube.gateway import ClusterGateway as Gateway

Obj = dict[str, Any]


class NotOwnedError(PermanentKubeError):
    """An object of that name exists and is not this request's: nothing was changed."""

    def __init__(self, message: str, labels: dict[str, str]) -> None:
        super().__init__(message, 409, "AlreadyExists")
        self.labels = labels


def owns(obj: Obj, labels: dict[str, str]) -> bool:
    """True when obj carries every one of `labels` with the same value."""
    present = (obj.get("metadata") or {}).get("labels") or {}
    return all(present.get(key) == value for key, value in labels.items())


def uid_of(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def describe(manifest: Obj) -> str:
    """ "namespace gpu-operator", "ResourceClaim train in namespace team-a", ..."""
    metadata = manifest["metadata"]
    kind = manifest["kind"]
    if kind == "Namespace":
        return f"namespace {metadata['name']}"
    return f"{kind} {metadata['name']} in namespace {metadata.get('namespace')}"


def _target(manifest: Obj) -> tuple[str, str, str | None, str]:
    metadata = manifest["metadata"]
    return manifest["apiVersion"], manifest["kind"], metadata.get("namespace"), metadata["name"]


def create_or_adopt(
    gateway: Gateway, manifest: Obj, *, uid: str = "", kin: dict[str, str] | None = None
) -> Obj:
    """Absent → create; present and ours → adopt (apply); anything else → NotOwnedError.

    Ours means it carries the manifest's labels, or it is the very object we created (`uid`,
    when recorded: its labels were changed outside the portal, and the apply restores them).
    A namespace or object of ours that is being deleted is waited for (transient): creating
    into it would be refused, and adopting it would lose it a moment later. So is one of
    another request of this portal (it carries the `kin` labels): the portal is removing it.
    Anyone else's that is being deleted is refused: it may never go.

    The first attempt (no uid recorded) creates without reading first: a create changes
    nothing that exists, and its 409 sends us to the same checks, one round trip fewer.
    """
    existing = gateway.read(*_target(manifest)) if uid else None
    if existing is None:
        try:
            return gateway.create(manifest)
        except PermanentKubeError as error:
            if error.status != 409:
                raise
            existing = gateway.read(*_target(manifest))  # made meanwhile: by whom?
            if existing is None:
                raise TransientKubeError(f"{describe(manifest)}: {error.message}") from error
    if is_terminating(existing) and kin and owns(existing, kin):
        raise TransientKubeError(f"{describe(manifest)} is still being deleted; waiting.")
    if not (uid and uid_of(existing) == uid):
        _check_ours(existing, manifest)
    if is_terminating(existing):
        raise TransientKubeError(f"{describe(manifest)} is still being deleted; waiting.")
    return gateway.apply(manifest)


def _check_ours(existing: Obj, manifest: Obj) -> None:
    labels = manifest["metadata"].get("labels") or {}
    if not owns(existing, labels):
        found = (existing.get("metadata") or {}).get("labels") or {}
        if is_terminating(existing):
            message = f"{describe(manifest)} is still being deleted; try again when it is gone."
            raise NotOwnedError(message, found)
        raise NotOwnedError(
            f"{describe(manifest)} already exists and is not managed by this portal "
            "(or belongs to another of its requests); nothing was changed.",
            found,
        )


def delete_owned(
    gateway: Gateway,
    api_version: str,
    kind: str,
    namespace: str | None,
    name: str,
    *,
    uid: str = "",
    labels: dict[str, str],
    propagation_policy: str = "",
) -> None:
    """Delete the object if it is the one we made; leave alone whatever else has its name.

    With the uid recorded at creation the API server checks it (preconditions.uid: a new
    object of the same name is refused with 409, which the gateway reports as not deleted);
    without one (the answer to the create was lost) the labels must prove it is ours.
    """
    if not uid:
        existing = gateway.read(api_version, kind, namespace, name)
        if existing is None or not owns(existing, labels):
            return
        uid = uid_of(existing)
    gateway.delete(
        api_version, kind, namespace, name, uid=uid, propagation_policy=propagation_policy
    )
