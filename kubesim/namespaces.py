"""Namespace deletion as kube-controller-manager's namespace controller does it
(pkg/controller/namespace/deletion, with OrderedNamespaceDeletion, on by default since 1.33).

A DELETE marks the namespace: `deletionTimestamp`, `status.phase: Terminating` (see
kubesim.graceful). After the controller's grace period (5 s, divided by `speed`) it deletes the
namespace's Pods, gracefully: their kubelet confirms each one. While Pods remain it stops there,
and its five deletion conditions say all is well (upstream writes them before it counts what
remains). Once the Pods are gone it deletes everything else; what finalizers still hold shows in
NamespaceContentRemaining and NamespaceFinalizersRemaining. With nothing left it removes its
`kubernetes` finalizer from `spec.finalizers` (the namespaces/finalize step) and the namespace goes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any

from kubesim import errors, graceful
from kubesim.store import Store, now_rfc3339

DELETION_DELAY_SECONDS = 5.0  # the controller's namespaceDeletionGracePeriod
FINALIZER = "kubernetes"
OK_CONDITIONS = (  # type, reason, message when nothing is wrong
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
)


def terminate(store: Store, namespace_kind: Any, name: str) -> dict[str, Any]:
    """Mark a namespace Terminating (or remove one without finalizers); the controller
    thread empties and removes it."""
    return store.delete(namespace_kind, None, name)


def remaining_conditions(resources: Counter[str], finalizers: Counter[str]) -> list[dict]:
    """The True conditions for content still in the namespace (ProcessContentTotals)."""
    found = []
    if resources:
        parts = sorted(f"{name} has {n} resource instances" for name, n in resources.items())
        message = f"Some resources are remaining: {', '.join(parts)}"
        found.append(_condition("NamespaceContentRemaining", "SomeResourcesRemain", message))
    if finalizers:
        parts = sorted(f"{name} in {n} resource instances" for name, n in finalizers.items())
        message = f"Some content in the namespace has finalizers remaining: {', '.join(parts)}"
        found.append(_condition("NamespaceFinalizersRemaining", "SomeFinalizersRemain", message))
    return found


def _condition(kind: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": now_rfc3339(),
        "reason": reason,
        "message": message,
    }


def updated_conditions(old: list[dict], failures: list[dict]) -> list[dict] | None:
    """The namespace's conditions after one pass (updateConditions); None if unchanged.
    A condition keeps its lastTransitionTime unless its status changes."""
    new = [dict(c) for c in old]
    changed = False
    wanted = {c["type"]: c for c in failures}
    for kind, reason, message in OK_CONDITIONS:
        target = wanted.get(kind) or _condition(kind, reason, message, "False")
        current = next((c for c in new if c.get("type") == kind), None)
        if current is None:
            new.append(target)
            changed = True
            continue
        fields = ("status", "reason", "message")
        if any(current.get(f) != target[f] for f in fields):
            if current.get("status") != target["status"]:
                current["lastTransitionTime"] = target["lastTransitionTime"]
            current.update({f: target[f] for f in fields})
            changed = True
    return new if changed else None


class NamespaceFinalizer:
    def __init__(
        self,
        store: Store,
        kinds: dict[tuple[str, str], Any],
        interval: float = 0.05,
        speed: float = 1.0,
    ) -> None:
        self.store = store
        self.namespace_kind = kinds[("", "namespaces")]
        self.pods = kinds[("", "pods")]
        self.others = [k for k in kinds.values() if k.namespaced and k.plural != "pods"]
        self.interval = interval
        self.delay = DELETION_DELAY_SECONDS / max(float(speed or 1.0), 0.001)
        self._first_seen: dict[str, float] = {}  # namespace uid → when seen terminating
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubesim-namespaces", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2)

    def _on_event(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural == "namespaces" and obj["metadata"].get("deletionTimestamp"):
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            while not self._stop.is_set() and self._finalize_all():
                self._stop.wait(self.interval)

    def _finalize_all(self) -> bool:
        """Advance every terminating namespace; True while some are still waiting."""
        namespaces, _ = self.store.list(self.namespace_kind)
        waiting = False
        now = time.monotonic()
        for namespace in namespaces:
            meta = namespace["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            seen = self._first_seen.setdefault(meta["uid"], now)
            if now < seen + self.delay:
                waiting = True  # the controller's queue holds a new deletion back
                continue
            try:
                waiting |= not self._finalize(meta["name"])
            except errors.ApiError:
                waiting = True  # a conflict or a vanished object: the next pass retries
        return waiting

    def _finalize(self, name: str) -> bool:
        """One pass of the namespace controller; True once the namespace is finalized."""
        if self._delete_pods(name):
            self._write_conditions(name, [])  # the early return for Pods: no totals yet
            return False
        resources, finalizers = self._delete_content(name)
        self._write_conditions(name, remaining_conditions(resources, finalizers))
        if resources:
            return False
        self._remove_finalizer(name)
        return True

    def _delete_pods(self, namespace: str) -> int:
        """Delete every Pod gracefully (each with its own grace period); how many remain."""
        pods, _ = self.store.list(self.pods, namespace)
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                grace = graceful.pod_grace_seconds(pod, {})
                self._delete_quietly(self.pods, namespace, pod["metadata"]["name"], grace)
        return len(self.store.list(self.pods, namespace, copy=False)[0])

    def _delete_content(self, namespace: str) -> tuple[Counter[str], Counter[str]]:
        """Delete everything else; count what remains, by resource and by finalizer."""
        resources: Counter[str] = Counter()
        finalizers: Counter[str] = Counter()
        for kind in self.others:
            items, _ = self.store.list(kind, namespace)
            for item in items:
                if not item["metadata"].get("deletionTimestamp"):
                    self._delete_quietly(kind, namespace, item["metadata"]["name"])
            for item in self.store.list(kind, namespace, copy=False)[0]:
                resources[f"{kind.plural}.{kind.group}"] += 1
                finalizers.update(item["metadata"].get("finalizers") or [])
        return resources, finalizers

    def _write_conditions(self, name: str, failures: list[dict]) -> None:
        namespace = self.store.get(self.namespace_kind, None, name)
        status = namespace.setdefault("status", {})
        conditions = updated_conditions(status.get("conditions") or [], failures)
        if conditions is not None:
            status["conditions"] = conditions
            self.store.update(self.namespace_kind, namespace)

    def _remove_finalizer(self, name: str) -> None:
        namespace = self.store.get(self.namespace_kind, None, name)
        spec = namespace.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
        self.store.update(self.namespace_kind, namespace)
        self._first_seen.pop(namespace["metadata"]["uid"], None)

    def _delete_quietly(
        self, kind: Any, namespace: str | None, name: str, grace: int | None = None
    ) -> None:
        # Already gone is fine: someone else deleted it meanwhile.
        with contextlib.suppress(errors.ApiError):
            self.store.delete(kind, namespace, name, grace=grace)
