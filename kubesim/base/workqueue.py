"""The work queues kubesim's controllers share, as client-go's: keys of objects to sync, one
thread that syncs them in turn, the store's events deciding what to queue; the delaying one
also holds keys until a time (AddAfter)."""

from __future__ import annotations

import contextlib
import heapq
import queue
import threading
import time
from typing import Any

from kubesim.base import errors


class NameQueueController:
    """Subclasses queue names (or any item) in `_on_event` and bring one to what it should be
    in `sync`; an object gone or changed meanwhile is synced again at its next event."""

    thread_name = "kubesim-controller"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._names: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        store.subscribe(self._on_event)

    def initial_names(self) -> list[Any]:
        return []

    def start(self) -> Any:
        for name in self.initial_names():
            self.enqueue(name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._names.put(None)
        self._thread.join(timeout=2)

    def enqueue(self, name: Any) -> None:
        self._names.put(name)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        raise NotImplementedError

    def sync(self, name: Any) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while (name := self._names.get()) is not None:
            with contextlib.suppress(errors.ApiError):
                self.sync(name)


class DelayingQueueController:
    """As NameQueueController, but a key may wait until a time (`enqueue(key, delay)`);
    `process` syncs one key (by default ignoring an API error: the next event requeues it)."""

    thread_name = "kubesim-controller"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._due: list[tuple[float, str]] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        store.subscribe(self._on_event)

    def initial_names(self) -> list[str]:
        return []

    def start(self) -> Any:
        for key in self.initial_names():
            self.enqueue(key)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=2)

    def enqueue(self, key: str, delay: float = 0.0) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + delay, key))
            self._wake.notify_all()

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        raise NotImplementedError

    def sync(self, key: str) -> None:
        raise NotImplementedError

    def process(self, key: str) -> None:
        with contextlib.suppress(errors.ApiError):
            self.sync(key)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and (not self._due or self._due[0][0] > time.monotonic()):
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                if self._stopping:
                    return
                _, key = heapq.heappop(self._due)
                # client-go's queue dedupes only what is in it ("dirty"): an AddAfter waits
                # outside it until its time (delaying_queue.go's waitingForQueue), so an entry
                # for a later time must not swallow this one.
                now = time.monotonic()
                pending = any(k == key and due <= now for due, k in self._due)
            if not pending:  # another entry due now syncs it again anyway
                self.process(key)
