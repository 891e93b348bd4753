"""The work queue kubesim's controllers share, as client-go's: names of objects to sync, one
thread that syncs them in turn, the store's events deciding what to queue."""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any

from kubesim.base import errors


class NameQueueController:
    """Subclasses queue names in `_on_event` and bring one to what it should be in `sync`;
    an object gone or changed meanwhile is synced again at its next event."""

    thread_name = "kubesim-controller"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._names: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        store.subscribe(self._on_event)

    def initial_names(self) -> list[str]:
        return []

    def start(self) -> Any:
        for name in self.initial_names():
            self.enqueue(name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._names.put(None)
        self._thread.join(timeout=2)

    def enqueue(self, name: str) -> None:
        self._names.put(name)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        raise NotImplementedError

    def sync(self, name: str) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while (name := self._names.get()) is not None:
            with contextlib.suppress(errors.ApiError):
                self.sync(name)
