"""Storage of every object in its storage form, one resourceVersion counter, watch history."""

from __future__ import annotations

import builtins
import itertools
import json
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubesim.base import errors
from kubesim.base.selectors import Matcher
from kubesim.registry import graceful

HISTORY_SIZE = 10_000


class KindRef(Protocol):
    group: str
    plural: str
    kind: str
    namespaced: bool


@dataclass(frozen=True)
class Event:
    rv: int
    type: str
    key: tuple[str, str]
    obj: dict[str, Any]


Subscriber = Callable[[str, Any, dict[str, Any]], None]


# Kinds whose strategy keeps metadata.generation (1.34: ResourceClaims, Namespaces and Nodes
# have none).
GENERATION_KINDS = {"pods", "deviceclasses", "resourceslices"}


def clone(value: Any) -> Any:
    """A deep copy of JSON-shaped data, about twice as fast as copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}
    if kind is list:
        return [clone(item) for item in value]
    return value


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _namespace_of(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("namespace") or ""


def storage_key(ref: Any) -> tuple[str, str]:
    """Where a kind's objects live; events.k8s.io Events are the core Events."""
    return getattr(ref, "storage_key", (ref.group, ref.plural))


def _without_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def fill_system_fields(ref: Any, meta: dict[str, Any]) -> None:
    """What the API server sets on every new object, a dry-run create included (uid,
    creationTimestamp, generation); a resourceVersion comes only with storing it."""
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    if ref.plural in GENERATION_KINDS:
        meta["generation"] = 1
    for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        meta.pop(transient, None)


def with_uid(ref: Any, obj: dict[str, Any]) -> None:
    """What a kind's strategy derives from the new uid (a Job's generated selector)."""
    derive = getattr(ref, "from_uid", None)
    if derive is not None:
        derive(obj)


class Store:
    def __init__(self, state_path: str | None = None, history_size: int = HISTORY_SIZE) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._refs: dict[tuple[str, str], Any] = {}
        self._history: deque[Event] = deque(maxlen=history_size)
        self._subscribers: list[Subscriber] = []
        self._rv = 1
        self._compacted_rv = 1
        self._closed = False
        self._state_path = state_path
        self._dirty = False
        if state_path and os.path.exists(state_path):
            self._load(state_path)

    # -- reading ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def compacted_rv(self) -> int:
        return self._compacted_rv

    def wait_for(self, rv: int, seconds: float) -> bool:
        """Whether the store reaches resourceVersion `rv` within `seconds`."""
        with self._lock:
            return self._changed.wait_for(lambda: self._rv >= rv or self._closed, seconds) and (
                self._rv >= rv
            )

    def get(
        self, ref: Any, namespace: str | None, name: str, *, copy: bool = True
    ) -> dict[str, Any]:
        """The stored object; `copy=False` shares it with a caller that promises not to
        change it (the HTTP layer, which converts it to a fresh dict anyway)."""
        with self._lock:
            obj = self._bucket(ref).get((namespace or "", name))
            if obj is None:
                raise errors.not_found(ref.group, ref.plural, name)
            return clone(obj) if copy else obj

    def list(
        self,
        ref: Any,
        namespace: str | None = None,
        label_selector: Matcher | None = None,
        field_selector: Matcher | None = None,
        *,
        copy: bool = True,
    ) -> tuple[list[dict[str, Any]], int]:
        with self._lock:
            bucket = self._bucket(ref)
            keys = sorted(key for key in bucket if not namespace or key[0] == namespace)
            items = [bucket[key] for key in keys]
            rv = self._rv
        items = [obj for obj in items if _selected(obj, label_selector, field_selector)]
        return ([clone(obj) for obj in items] if copy else items), rv

    # -- writing ---------------------------------------------------------------------------

    def create(self, ref: Any, obj: dict[str, Any]) -> dict[str, Any]:
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace") or "", meta["name"])
        with self._lock:
            bucket = self._bucket(ref)
            if key in bucket:
                raise errors.already_exists(ref.group, ref.plural, key[1])
            fill_system_fields(ref, meta)
            with_uid(ref, obj)
            stored = self._commit(ref, key, obj, "ADDED")
        self._notify("ADDED", ref, stored)
        return stored

    def update(self, ref: Any, obj: dict[str, Any], *, check_rv: bool = True) -> dict[str, Any]:
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace") or "", meta.get("name", ""))
        with self._lock:
            old = self._bucket(ref).get(key)
            if old is None:
                raise errors.not_found(ref.group, ref.plural, key[1])
            sent_rv = meta.get("resourceVersion")
            if check_rv and sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(ref.group, ref.plural, key[1])
            _keep_system_metadata(meta, old["metadata"])
            if ref.plural in GENERATION_KINDS and _spec_changed(old, obj):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
            if _without_volatile(old) == _without_volatile(obj):
                return clone(old)
            if _deletion_complete(obj):
                stored = self._remove(ref, key, obj)
                event = "DELETED"
            else:
                stored = self._commit(ref, key, obj, "MODIFIED")
                event = "MODIFIED"
        self._notify(event, ref, stored)
        if event == "DELETED":
            # The registry's deleteWithoutFinalizers: the update that removed the last
            # finalizer answers with the object as updated, at the version it replaced.
            stored["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return stored

    def delete(
        self,
        ref: Any,
        namespace: str | None,
        name: str,
        grace: int | None = None,
        finalizer: str | None = None,
    ) -> dict[str, Any]:
        """Remove the object, or mark it deleted while finalizers or a grace period (`grace`
        seconds, for kinds with graceful deletion) hold it; see kubesim.registry.graceful.
        `finalizer`: what the propagation policy adds first (orphan, foregroundDeletion)."""
        key = (namespace or "", name)
        with self._lock:
            old = self._bucket(ref).get(key)
            if old is None:
                raise errors.not_found(ref.group, ref.plural, name)
            obj = clone(old)
            pending = obj["metadata"].get("finalizers") or []
            if finalizer and finalizer not in pending:
                obj["metadata"]["finalizers"] = [*pending, finalizer]
            action = graceful.mark(obj, grace, pending_finalizers=bool(_finalizers(obj)))
            if action == "keep":
                return obj
            if action == "update":
                stored = self._commit(ref, key, obj, "MODIFIED")
                event = "MODIFIED"
            else:
                stored = self._remove(ref, key, obj)
                event = "DELETED"
        self._notify(event, ref, stored)
        return stored

    def subscribe(self, callback: Subscriber) -> None:
        self._subscribers.append(callback)

    # -- watching --------------------------------------------------------------------------

    def events_since(self, since_rv: int) -> builtins.list[Event]:
        """Events after since_rv; raises 410 Expired when they left the history window."""
        with self._lock:
            if since_rv < self._compacted_rv:
                raise errors.expired(since_rv, self._compacted_rv)
            # Walk back from the newest: a watcher that keeps up only needs the last few.
            newer = list(itertools.takewhile(lambda e: e.rv > since_rv, reversed(self._history)))
            newer.reverse()
            return newer

    def watch(
        self, ref: Any, namespace: str | None, since_rv: int, tick: float = 1.0
    ) -> Iterator[Event | None]:
        """Yield events of one resource after since_rv; `None` every `tick` seconds of quiet."""
        key = storage_key(ref)
        last = since_rv
        while not self._closed:
            with self._lock:
                pending = self.events_since(last)
                if not pending:
                    self._changed.wait(tick)
                    pending = self.events_since(last)
            if not pending:
                yield None
                continue
            last = pending[-1].rv
            for event in pending:
                if event.key == key and (not namespace or _namespace_of(event.obj) == namespace):
                    yield event

    def compact(self) -> None:
        """Forget all history, as etcd compaction does: older watches then get 410."""
        with self._lock:
            self._history.clear()
            self._compacted_rv = self._rv

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()
        self.save()

    # -- internals -------------------------------------------------------------------------

    def _bucket(self, ref: Any) -> dict[tuple[str, str], dict[str, Any]]:
        key = storage_key(ref)
        self._refs.setdefault(key, ref)
        return self._objects.setdefault(key, {})

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _commit(self, ref: Any, key: tuple[str, str], obj: dict, kind: str) -> dict[str, Any]:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        self._bucket(ref)[key] = obj
        self._record(Event(rv, kind, storage_key(ref), obj))
        return clone(obj)

    def _remove(self, ref: Any, key: tuple[str, str], obj: dict) -> dict[str, Any]:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        self._bucket(ref).pop(key, None)
        self._record(Event(rv, "DELETED", storage_key(ref), obj))
        return clone(obj)

    def _record(self, event: Event) -> None:
        if len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0].rv
        self._history.append(event)
        self._dirty = True
        self._changed.notify_all()

    def _notify(self, event: str, ref: Any, obj: dict[str, Any]) -> None:
        for callback in list(self._subscribers):
            callback(event, ref, clone(obj))

    # -- persistence -----------------------------------------------------------------------

    def save(self) -> None:
        if not self._state_path or not self._dirty:
            return
        with self._lock:
            snapshot = {
                "resourceVersion": self._rv,
                "objects": [
                    {"group": group, "plural": plural, "items": list(bucket.values())}
                    for (group, plural), bucket in self._objects.items()
                ],
            }
            self._dirty = False
        tmp = f"{self._state_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(snapshot, f)
        os.replace(tmp, self._state_path)

    def _load(self, path: str) -> None:
        with open(path) as f:
            snapshot = json.load(f)
        for entry in snapshot["objects"]:
            bucket = self._objects.setdefault((entry["group"], entry["plural"]), {})
            for obj in entry["items"]:
                bucket[(_namespace_of(obj), obj["metadata"]["name"])] = obj
        self._rv = self._compacted_rv = int(snapshot["resourceVersion"])

    def exists(self, ref: Any, namespace: str | None, name: str) -> bool:
        with self._lock:
            return (namespace or "", name) in self._bucket(ref)

    def has_objects(self, group: str, plural: str) -> bool:
        with self._lock:
            return bool(self._objects.get((group, plural)))


def _finalizers(obj: dict[str, Any]) -> list[str]:
    """Finalizers holding an object back; a namespace's also sit in `spec.finalizers`."""
    pending = list(obj.get("metadata", {}).get("finalizers") or [])
    if obj.get("kind") == "Namespace":
        pending += (obj.get("spec") or {}).get("finalizers") or []
    return pending


def _deletion_complete(obj: dict[str, Any]) -> bool:
    """Marked deleted, no finalizer left and no grace period running (ShouldDeleteDuringUpdate)."""
    meta = obj.get("metadata", {})
    return (
        bool(meta.get("deletionTimestamp"))
        and not _finalizers(obj)
        and not meta.get("deletionGracePeriodSeconds")
    )


def _selected(obj: dict[str, Any], labels: Matcher | None, fields: Matcher | None) -> bool:
    return (labels is None or labels(obj)) and (fields is None or fields(obj))


def _keep_system_metadata(meta: dict[str, Any], old: dict[str, Any]) -> None:
    for name in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
        if name in old:
            meta[name] = old[name]
        else:
            meta.pop(name, None)
    if "deletionGracePeriodSeconds" in old:
        meta["deletionGracePeriodSeconds"] = old["deletionGracePeriodSeconds"]


def _spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    ignored = ("metadata", "status", "apiVersion", "kind")
    old_rest = {k: v for k, v in old.items() if k not in ignored}
    new_rest = {k: v for k, v in new.items() if k not in ignored}
    for rest in (old_rest, new_rest):  # a binding sets spec.nodeName, generation stays
        if isinstance(rest.get("spec"), dict):
            rest["spec"] = {k: v for k, v in rest["spec"].items() if k != "nodeName"}
    return old_rest != new_rest
