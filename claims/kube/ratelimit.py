"""The client-side rate limit in front of every request to a cluster: a token bucket, as
client-go's flowcontrol puts in front of every client, in this process (TokenBucket) or shared
by every process of the portal through Redis (SharedTokenBucket), so the limit is the portal's
per cluster however many workers it runs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

# client-go's defaults, for a gateway made without a limit of its own (a tool, a test); the
# portal's per cluster are KUBE_CLIENT_QPS and KUBE_CLIENT_BURST (portal/settings.py).
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


class Limiter(Protocol):
    def acquire(self) -> None:
        """Block the caller until its request may go."""


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


# The same bucket as GCRA on the Redis server's clock: the key holds the time at which the
# bucket is full again minus one interval ("theoretical arrival time"). A caller reserves its
# slot at once and waits outside Redis, as TokenBucket's callers do.
RESERVE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tolerance - now
local after = tat + interval
redis.call('SET', KEYS[1], tostring(after), 'PX', math.ceil((after - now) * 1000) + 1000)
if wait < 0 then wait = 0 end
return tostring(wait)
"""


LOCAL_AFTER_FAILURE_SECONDS = 10.0


class SharedTokenBucket:
    """A TokenBucket shared by every process using `key` on one Redis: `burst` at once, then
    `qps` a second in all. Without Redis (down, unreachable) each process falls back to a
    bucket of its own with the same numbers, and says so once: the cluster's work goes on."""

    def __init__(
        self,
        redis_client: Any,
        key: str,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self._key = key
        self._clock, self._sleep = clock, sleep
        self._reserve = redis_client.register_script(RESERVE)
        self._local = TokenBucket(qps, burst, clock=clock, sleep=sleep)
        self._local_until = 0.0  # after a failure of Redis, the local bucket until then

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        if self._clock() < self._local_until:
            self._local.acquire()
            return
        interval = 1.0 / self.qps
        try:
            reserved = self._reserve(keys=[self._key], args=[interval, interval * (self.burst - 1)])
        except Exception as error:  # any failure of Redis: never stop the cluster's work
            log.warning(
                "rate limit of %s in this process only for %g s: %s",
                self._key,
                LOCAL_AFTER_FAILURE_SECONDS,
                error,
            )
            self._local_until = self._clock() + LOCAL_AFTER_FAILURE_SECONDS
            self._local.acquire()
            return
        wait = float(reserved)
        if wait > 0:
            self._sleep(wait)
