"""Namespace deletion: Terminating first, then every object in it, then the namespace itself."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from kubesim import errors
from kubesim.store import Store


def terminate(store: Store, namespace_kind: Any, name: str) -> dict[str, Any]:
    """Mark a namespace Terminating; the finalizer thread empties and removes it."""
    namespace = store.delete(namespace_kind, None, name)
    gone = not namespace["metadata"].get("deletionTimestamp")
    if gone or namespace.get("status", {}).get("phase") == "Terminating":
        return namespace
    namespace.setdefault("status", {})["phase"] = "Terminating"
    return store.update(namespace_kind, namespace, check_rv=False)


class NamespaceFinalizer:
    def __init__(
        self, store: Store, kinds: dict[tuple[str, str], Any], interval: float = 0.05
    ) -> None:
        self.store = store
        self.namespace_kind = kinds[("", "namespaces")]
        self.namespaced = [kind for kind in kinds.values() if kind.namespaced]
        self.interval = interval
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
        for namespace in namespaces:
            if namespace["metadata"].get("deletionTimestamp"):
                waiting |= not self._finalize(namespace["metadata"]["name"])
        return waiting

    def _finalize(self, name: str) -> bool:
        remaining = 0
        for kind in self.namespaced:
            items, _ = self.store.list(kind, name)
            for item in items:
                remaining += 1
                if not item["metadata"].get("deletionTimestamp"):
                    self._delete_quietly(kind, name, item["metadata"]["name"])
        if remaining:
            return False
        try:
            namespace = self.store.get(self.namespace_kind, None, name)
            namespace.setdefault("spec", {})["finalizers"] = []
            self.store.update(self.namespace_kind, namespace, check_rv=False)
        except errors.ApiError:
            pass  # already gone
        return True

    def _delete_quietly(self, kind: Any, namespace: str | None, name: str) -> None:
        # Already gone is fine: someone else deleted it meanwhile.
        with contextlib.suppress(errors.ApiError):
            self.store.delete(kind, namespace, name)
