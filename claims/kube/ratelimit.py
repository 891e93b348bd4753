"""A client-side token bucket, as client-go's flowcontrol puts in front of every client."""

import threading
import time
from collections.abc import Callable

DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


class TokenBucket:
    """`burst` requests at once, then `qps` a second; `acquire` blocks the caller until its turn.

    A caller takes its token at once (the count may go below zero) and sleeps outside the
    lock, so concurrent callers are paced one after another, as golang.org/x/time/rate does.
    `qps <= 0` turns the limit off.
    """

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()

    def _reserve(self) -> float:
        """Take one token; how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            refilled = self._tokens + (now - self._last) * self.qps
            self._tokens = min(float(self.burst), refilled) - 1
            self._last = now
            return -self._tokens / self.qps if self._tokens < 0 else 0.0

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        wait = self._reserve()
        if wait > 0:
            self._sleep(wait)
