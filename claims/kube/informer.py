"""A cache of one kind of object, kept current by a watch (client-go's informer, in small).

It lists once, then watches from the list's resourceVersion with bookmarks, resumes where it
left off when a watch ends or breaks, and lists again only when the server says the version
is too old (410). So a cluster where nothing changes costs one open stream, not a list per
second; every change calls on_change (one the parse cannot see, say a condition's new time,
is not a change).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from claims.kube.errors import KubeError, ResourceVersionExpired
from claims.kube.gateway import ClusterGateway

log = logging.getLogger(__name__)

State = TypeVar("State")
Key = tuple[str, str]

WATCH_SECONDS = 300  # how long one watch request lasts before it is resumed
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0


class Informer(Generic[State]):
    def __init__(
        self,
        gateway: ClusterGateway,
        kind: str,
        label_selector: str,
        parse: Callable[[dict[str, Any]], State],
        on_change: Callable[[], None],
        *,
        watch_seconds: int = WATCH_SECONDS,
        silence_seconds: float | None = None,
    ) -> None:
        self.gateway, self.kind, self.label_selector = gateway, kind, label_selector
        self.parse, self.on_change, self.watch_seconds = parse, on_change, watch_seconds
        self.silence_seconds = silence_seconds
        self._items: dict[Key, State] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._end_stream: Callable[[], None] | None = None
        self.resource_version = ""
        # The cache held everything the cluster had at this time (None: not yet listed).
        self.current_at: datetime | None = None
        self.error = ""
        self.lists = 0
        self.watching = False  # a watch is open
        self.thread = threading.Thread(target=self.run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer[State]:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._end_stream is not None:
            self._end_stream()

    def snapshot(self) -> tuple[list[State], datetime | None]:
        with self._lock:
            return list(self._items.values()), self.current_at

    def run(self) -> None:
        delay = RETRY_FIRST_SECONDS
        while not self._stopping.is_set():
            try:
                if not self.resource_version:
                    self._list()
                started = time.monotonic()
                self._watch()
                delay = RETRY_FIRST_SECONDS
                if time.monotonic() - started < RETRY_FIRST_SECONDS:
                    # A watch the server ends at once (overloaded, shutting down) must not
                    # turn into a busy loop of requests.
                    self._stopping.wait(RETRY_FIRST_SECONDS)
                if not self._stopping.is_set():
                    _restarted(self.kind, "ended")
            except ResourceVersionExpired:
                self.resource_version = ""
                _restarted(self.kind, "expired")
            except KubeError as error:
                if self._stopping.is_set():
                    break
                _restarted(self.kind, "error")
                log.warning("watching %s: %s (again in %g s)", self.kind, error, delay)
                self.error = error.message
                self._stopping.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    def _list(self) -> None:
        listed_at = datetime.now(UTC)
        objects, version = self.gateway.list_with_version(self.kind, self.label_selector)
        with self._lock:
            self._items = {_key(obj): self.parse(obj) for obj in objects}
            self.resource_version, self.current_at, self.error = version, listed_at, ""
            self.lists += 1
        self.on_change()

    def _watch(self) -> None:
        events = self.gateway.watch(
            self.kind,
            self.label_selector,
            self.resource_version,
            self.watch_seconds,
            on_open=self._opened,
            silence_seconds=self.silence_seconds,
        )
        try:
            self._apply(events)
        finally:
            self.watching = False

    def _apply(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
        for kind_of_event, obj in events:
            changed = kind_of_event == "DELETED"
            with self._lock:
                if kind_of_event == "DELETED":
                    self._items.pop(_key(obj), None)
                elif kind_of_event in ("ADDED", "MODIFIED"):
                    key, parsed = _key(obj), self.parse(obj)
                    # A write the portal cannot see in what it parses (a condition's time, a
                    # field it does not read) is no change to follow.
                    changed = self._items.get(key) != parsed
                    self._items[key] = parsed
                self.resource_version = obj["metadata"]["resourceVersion"]
                self.current_at, self.error = datetime.now(UTC), ""
            if changed:
                self.on_change()
            if self._stopping.is_set():
                return

    def _opened(self, end_stream: Callable[[], None]) -> None:
        self._end_stream, self.watching = end_stream, True
        if self._stopping.is_set():
            end_stream()


# Told of each watch started again (kind, reason): the portal's metrics add themselves.
restart_observers: list[Callable[[str, str], None]] = []


def _restarted(kind: str, reason: str) -> None:
    for observer in restart_observers:
        observer(kind, reason)


def _key(obj: dict[str, Any]) -> Key:
    metadata = obj["metadata"]
    return metadata.get("namespace", ""), metadata["name"]
