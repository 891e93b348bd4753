"""Namespace deletion as kube-controller-manager's namespace controller does it
(pkg/controller/namespace/deletion, with OrderedNamespaceDeletion, on by default since 1.33).

A DELETE marks the namespace: `deletionTimestamp`, `status.phase: Terminating` (see
kubesim.registry.graceful). After the controller's grace period (5 s, divided by `speed`) it
deletes the
namespace's Pods, gracefully: their kubelet confirms each one. While Pods remain it stops there,
and its five deletion conditions say all is well (upstream writes them before it counts what
remains). Once the Pods are gone it deletes everything else; what finalizers still hold shows in
NamespaceContentRemaining and NamespaceFinalizersRemaining. With nothing left it removes its
`kubernetes` finalizer from `spec.finalizers` (the namespaces/finalize step) and the namespace goes.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import Counter
from typing import Any

from kubesim.base import errors
from kubesim.registry import graceful
from kubesim.registry.apply import record_update
from kubesim.registry.store import Store, now_rfc3339

DELETION_DELAY_SECONDS = 5.0  # the controller's namespaceDeletionGracePeriod
FINALIZER_ESTIMATE_SECONDS = 15  # finalizerEstimateSeconds: content held by finalizers
FINALIZER = "kubernetes"
MANAGER = "kube-controller-manager"
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


def _pods_estimate(pods: list[dict[str, Any]]) -> int:
    """estimateGracefulTerminationForPods: the longest grace period of the Pods not finished."""
    periods = [
        (pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
        for pod in pods
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    return max(periods, default=0)


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
    """The controller's loop: a delaying queue of namespace names. Every write to a
    terminating namespace (its deletion, the conditions the controller writes itself) queues it
    after the 5 s grace period; a pass that leaves content behind queues it again after half
    the estimated time (ResourcesRemainingError). Changes of the content itself queue nothing."""

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
        self.speed = max(float(speed or 1.0), 0.001)
        self._due: dict[str, float] = {}  # namespace name → when the queue hands it out
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubesim-namespaces", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> None:
        # The informer's first list: namespaces already terminating (a state file) are queued.
        for namespace in self.store.list(self.namespace_kind, copy=False)[0]:
            self._on_event("ADDED", self.namespace_kind, namespace)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2)

    def _on_event(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if kind.plural == "namespaces" and event != "DELETED" and meta.get("deletionTimestamp"):
            self._queue_after(meta["name"], DELETION_DELAY_SECONDS / self.speed)

    def _queue_after(self, name: str, seconds: float) -> None:
        """workqueue.AddAfter: an earlier time wins over a later one already queued."""
        due = time.monotonic() + seconds
        with self._lock:
            self._due[name] = min(self._due.get(name, due), due)
        self._wake.set()

    def _next(self) -> tuple[str | None, float]:
        """The namespace whose time has come, or how long to wait for one."""
        with self._lock:
            if not self._due:
                return None, 1.0
            name, due = min(self._due.items(), key=lambda item: item[1])
            wait = due - time.monotonic()
            if wait > 0:
                return None, wait
            del self._due[name]
            return name, 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            name, wait = self._next()
            if name is None:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            try:
                estimate = self._finalize(name)
            except errors.ApiError:
                estimate = 0  # a conflict or a vanished object: AddRateLimited, soon again
            if estimate is not None:
                wait = (estimate // 2 + 1) / self.speed if estimate else self.interval
                self._queue_after(name, wait)

    def _finalize(self, name: str) -> int | None:
        """One pass of the namespace controller (Delete): None once the namespace is
        finalized or gone, else the estimated seconds until its content is gone."""
        try:
            namespace = self.store.get(self.namespace_kind, None, name, copy=False)
        except errors.ApiError:
            return None
        if not namespace["metadata"].get("deletionTimestamp"):
            return None
        pods = self._delete_pods(name)
        if pods:
            self._write_conditions(name, [])  # the early return for Pods: no totals yet
            return _pods_estimate(pods)
        resources, finalizers = self._delete_content(name)
        self._write_conditions(name, remaining_conditions(resources, finalizers))
        if resources:
            return FINALIZER_ESTIMATE_SECONDS if finalizers else 0
        self._remove_finalizer(name)
        return None

    def _delete_pods(self, namespace: str) -> list[dict[str, Any]]:
        """Delete every Pod gracefully (each with its own grace period); those that remain."""
        pods, _ = self.store.list(self.pods, namespace)
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                grace = graceful.pod_grace_seconds(pod, {})
                self._delete_quietly(self.pods, namespace, pod["metadata"]["name"], grace)
        return self.store.list(self.pods, namespace, copy=False)[0]

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
        """The conditions as the controller's UpdateStatus writes them (namespaces/status)."""
        old = self.store.get(self.namespace_kind, None, name)
        conditions = updated_conditions((old.get("status") or {}).get("conditions") or [], failures)
        if conditions is None:
            return
        namespace = copy.deepcopy(old)
        namespace.setdefault("status", {})["conditions"] = conditions
        record_update(old, namespace, manager=MANAGER, api_version="v1", subresource="status")
        self.store.update(self.namespace_kind, namespace)

    def _remove_finalizer(self, name: str) -> None:
        namespace = self.store.get(self.namespace_kind, None, name)
        spec = namespace.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
        self.store.update(self.namespace_kind, namespace)

    def _delete_quietly(
        self, kind: Any, namespace: str | None, name: str, grace: int | None = None
    ) -> None:
        # Already gone is fine: someone else deleted it meanwhile.
        with contextlib.suppress(errors.ApiError):
            self.store.delete(kind, namespace, name, grace=grace)
