"""A cache of one kind of object, kept current by a watch (client-go's informer, in small).

It lists once, then watches from the list's resourceVersion with bookmarks, resumes where it
left off when a watch ends or breaks, and lists again only when the server says the version
is too old (410). So a cluster where nothing changes costs one open stream, not a list per
second; every change calls on_change (one the parse cannot see, say a condition's new time,
is not a change).

A list or watch the cluster refuses (401, 403) is no outage: it is tried again after
minutes, not seconds (doubling up to `refused_retry_seconds`), logged once when refused and
once when allowed again, and the cache fills by itself once the identity may.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from claims.kube.errors import KubeError, PermanentKubeError, ResourceVersionExpired
from claims.kube.gateway import ClusterGateway

log = logging.getLogger(__name__)

State = TypeVar("State")
Key = tuple[str, str]

WATCH_SECONDS = 300  # how long one watch request lasts before it is resumed
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
REFUSED_RETRY_SECONDS = 300.0  # the longest wait before asking again after a refusal
REFUSED_STATUSES = (401, 403)


def refused(error: KubeError) -> bool:
    return isinstance(error, PermanentKubeError) and error.status in REFUSED_STATUSES


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
        refused_retry_seconds: float = REFUSED_RETRY_SECONDS,
    ) -> None:
        self.gateway, self.kind, self.label_selector = gateway, kind, label_selector
        self.parse, self.on_change, self.watch_seconds = parse, on_change, watch_seconds
        self.silence_seconds = silence_seconds
        self.refused_retry_seconds = refused_retry_seconds
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
        # The cluster's refusal (401/403) of this list or watch, while it lasts.
        self.refusal: PermanentKubeError | None = None
        # When the next try after an error is due (time.monotonic) and the waits so far in
        # this run of errors: what the back-off did, for tests and the loop.
        self.retry_at: float | None = None
        self.retry_waits: list[float] = []
        self.thread = threading.Thread(target=self.run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer[State]:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._end_stream is not None:
            self._end_stream()

    @property
    def refused(self) -> bool:
        return self.refusal is not None

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
                delay = self._failed(error, delay)

    def _failed(self, error: KubeError, delay: float) -> float:
        """Wait before trying again; the next wait."""
        if refused(error):
            # A refusal lasts until an admin grants the permission: minutes, not seconds.
            if not self.refused:
                delay = self.refused_retry_seconds / 16
            if not self.refused or error.message != self.error:
                log.warning(
                    "the cluster refuses to let the portal watch %s: %s (asked again less and "
                    "less often, at most every %g s)",
                    self.kind,
                    error,
                    self.refused_retry_seconds,
                )
            else:
                log.debug("watching %s: still refused (again in %g s)", self.kind, delay)
            assert isinstance(error, PermanentKubeError)
            self.refusal, limit = error, self.refused_retry_seconds
        else:
            log.warning("watching %s: %s (again in %g s)", self.kind, error, delay)
            self.refusal, limit = None, RETRY_MAX_SECONDS
        self.error = error.message
        self.retry_at = time.monotonic() + delay
        self.retry_waits = [*self.retry_waits[-15:], delay]
        self._stopping.wait(delay)
        return min(delay * 2, limit)

    def _recovered(self) -> None:
        """Called with the lock held, when a list or watch event arrives."""
        if self.refused:
            log.info("the cluster lets the portal watch %s again", self.kind)
        self.error, self.refusal, self.retry_at, self.retry_waits = "", None, None, []

    def _list(self) -> None:
        listed_at = datetime.now(UTC)
        objects, version = self.gateway.list_with_version(self.kind, self.label_selector)
        with self._lock:
            self._items = {_key(obj): self.parse(obj) for obj in objects}
            self.resource_version, self.current_at = version, listed_at
            self._recovered()
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
                self.current_at = datetime.now(UTC)
                if self.error:
                    self._recovered()
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
