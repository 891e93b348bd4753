"""The garbage collector's owner references (pkg/controller/garbagecollector), for the
dependents kubesim's controllers make: Pods (of Jobs), and Kueue's Workloads (of Jobs, made by
whoever plays Kueue).

How an owner goes is the DELETE's propagationPolicy (apiserver registry: the kind's default
when none is given; batch/v1 Jobs' is Orphan, everything else's Background):
- Background: the owner is removed at once; then each dependent whose owners are all gone is
  deleted (a Pod gracefully).
- Foreground: the owner stays with deletionTimestamp and the `foregroundDeletion` finalizer
  while its dependents are deleted; once none with blockOwnerDeletion is left the finalizer
  goes, and the owner with it.
- Orphan: the owner stays with the `orphan` finalizer until the dependents' ownerReferences
  to it are removed; then the finalizer goes.

Simplified: only Pods and Kueue Workloads are looked at as dependents (not every resource),
and a dependent
of a Foreground deletion is deleted in the background.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from kubesim.base import errors
from kubesim.base.workqueue import NameQueueController
from kubesim.registry import graceful
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import CONTROLLER_MANAGER, record_write

PODS = kind_for("", "pods")
FOREGROUND, ORPHAN = "foregroundDeletion", "orphan"
DEPENDENT_KINDS = (PODS, kind_for("kueue.x-k8s.io", "workloads"))
JOB_DELETE_WARNING = (
    "child pods are preserved by default when jobs are deleted; set "
    "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress "
    "this warning"
)


def propagation_policy(kind: Any, options: dict, query: dict[str, str]) -> tuple[str, list[str]]:
    """The policy of a DELETE and the warnings it sends (DeleteOptions, or the query)."""
    policy = options.get("propagationPolicy") or query.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    if orphan is None and "orphanDependents" in query:
        orphan = query["orphanDependents"].lower() in ("true", "1")
    if policy in ("Orphan", "Background", "Foreground"):
        return policy, []
    if policy:
        detail = (
            f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"'
        )
        raise errors.ApiError(
            422, "Invalid", f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: {detail}'
        )
    if orphan is not None:
        return ("Orphan" if orphan else "Background"), []
    if kind.plural == "jobs":
        return "Orphan", [JOB_DELETE_WARNING]
    return "Background", []


def finalizer_for(policy: str) -> str | None:
    return {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(policy)


def _owned_by(obj: dict, uid: str) -> dict | None:
    for owner in obj["metadata"].get("ownerReferences") or []:
        if owner.get("uid") == uid:
            return owner
    return None


class GarbageCollector(NameQueueController):
    """One thread: owners going away (queued as their events), and what that means for
    their dependents."""

    thread_name = "kubesim-gc"

    def __init__(self, store: Any, kinds: dict) -> None:
        self.kinds = kinds
        super().__init__(store)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if event == "DELETED" or (
            meta.get("deletionTimestamp")
            and {FOREGROUND, ORPHAN} & set(meta.get("finalizers") or [])
        ):
            self.enqueue((event, ref, obj))

    def sync(self, name: Any) -> None:
        self._handle(*name)

    def _dependents(self, namespace: str, uid: str) -> list[tuple[Any, dict]]:
        found = []
        for kind in DEPENDENT_KINDS:
            items, _ = self.store.list(kind, namespace or None)
            found += [(kind, obj) for obj in items if _owned_by(obj, uid)]
        return found

    def _handle(self, event: str, ref: Any, obj: dict) -> None:
        meta = obj["metadata"]
        namespace, uid = meta.get("namespace", ""), meta["uid"]
        if event == "DELETED":
            for kind, dependent in self._dependents(namespace, uid):
                if self._owners_gone(dependent, namespace):
                    self._delete(kind, dependent)
            self._recheck_foreground_owners(obj, namespace)
            return
        finalizers = meta.get("finalizers") or []
        if ORPHAN in finalizers:
            for kind, dependent in self._dependents(namespace, uid):
                self._drop_owner(kind, dependent, uid)
            self._remove_finalizer(ref, obj, ORPHAN)
        elif FOREGROUND in finalizers:
            blocking = []
            for kind, dependent in self._dependents(namespace, uid):
                owner = _owned_by(dependent, uid) or {}
                if not dependent["metadata"].get("deletionTimestamp"):
                    self._delete(kind, dependent)
                if owner.get("blockOwnerDeletion"):
                    blocking.append(dependent)
            if not blocking:
                self._remove_finalizer(ref, obj, FOREGROUND)

    def _recheck_foreground_owners(self, dependent: dict, namespace: str) -> None:
        """A dependent gone: an owner deleted in the foreground may now go too."""
        for owner in dependent["metadata"].get("ownerReferences") or []:
            kind = _kind_of(self.kinds, owner)
            if kind is None:
                continue
            try:
                found = self.store.get(kind, namespace or None, owner["name"])
            except errors.ApiError:
                continue
            if found["metadata"]["uid"] == owner.get("uid") and found["metadata"].get(
                "deletionTimestamp"
            ):
                self.enqueue(("MODIFIED", kind, found))

    def _owners_gone(self, obj: dict, namespace: str) -> bool:
        for owner in obj["metadata"].get("ownerReferences") or []:
            kind = _kind_of(self.kinds, owner)
            if kind is None:
                continue
            try:
                found = self.store.get(kind, namespace or None, owner["name"])
            except errors.ApiError:
                continue
            if found["metadata"]["uid"] == owner.get("uid"):
                return False
        return True

    def _delete(self, kind: Any, obj: dict) -> None:
        meta = obj["metadata"]
        grace = graceful.pod_grace_seconds(obj, {}) if kind.plural == "pods" else None
        with contextlib.suppress(errors.ApiError):
            self.store.delete(kind, meta.get("namespace") or None, meta["name"], grace=grace)

    def _drop_owner(self, kind: Any, obj: dict, uid: str) -> None:
        before = copy.deepcopy(obj)
        owners = [o for o in obj["metadata"].get("ownerReferences") or [] if o.get("uid") != uid]
        if owners:
            obj["metadata"]["ownerReferences"] = owners
        else:
            obj["metadata"].pop("ownerReferences", None)
        record_write(kind, before, obj, CONTROLLER_MANAGER)
        self.store.update(kind, obj, check_rv=False)

    def _remove_finalizer(self, ref: Any, obj: dict, finalizer: str) -> None:
        meta = obj["metadata"]
        current = self.store.get(ref, meta.get("namespace") or None, meta["name"])
        if current["metadata"]["uid"] != meta["uid"]:
            return
        before = copy.deepcopy(current)
        kept = [f for f in current["metadata"].get("finalizers") or [] if f != finalizer]
        if kept:
            current["metadata"]["finalizers"] = kept
        else:
            current["metadata"].pop("finalizers", None)
        record_write(ref, before, current, CONTROLLER_MANAGER)
        self.store.update(ref, current, check_rv=False)


def _kind_of(kinds: dict, owner: dict) -> Any:
    group = (owner.get("apiVersion") or "").rpartition("/")[0]
    for (kind_group, _), kind in kinds.items():
        if kind_group == group and kind.kind == owner.get("kind"):
            return kind
    return None
