"""Fault injection (latency, errors, outages, broken watches) and request counters."""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubesim.base.errors import ApiError, bad_request

REASONS = {
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    502: ("InternalError", "Bad Gateway"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
    504: ("Timeout", "The server was unable to return a response in the time allotted"),
}
WATCH_MODES = (None, "drop", "silent")


@dataclass
class Fault:
    path: re.Pattern[str]
    latency_ms: float = 0
    error_rate: float = 0.0
    error_codes: list[int] = field(default_factory=lambda: [500])
    outage_until: float = 0.0
    watch: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


def injected_error(code: int) -> ApiError:
    reason, message = REASONS.get(code, ("InternalError", f"injected fault {code}"))
    return ApiError(code, reason, message)


def parse_fault(spec: dict[str, Any]) -> Fault:
    try:
        path = re.compile(str(spec.get("path") or ".*"))
        codes = [int(code) for code in spec.get("error_codes") or [500]]
        fault = Fault(
            path=path,
            latency_ms=float(spec.get("latency_ms") or 0),
            error_rate=float(spec.get("error_rate") or 0),
            error_codes=codes,
            outage_until=time.monotonic() + float(spec.get("outage_seconds") or 0),
            watch=spec.get("watch"),
        )
    except (re.error, TypeError, ValueError) as exc:
        raise bad_request(f"invalid fault: {exc}") from None
    if fault.watch not in WATCH_MODES or not 0 <= fault.error_rate <= 1:
        raise bad_request('invalid fault: watch must be "drop", "silent" or null')
    return fault


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._counters: Counter[str] = Counter()
        self._random = random.Random()

    def add(self, fault: Fault) -> str:
        with self._lock:
            self._faults.append(fault)
        return fault.id

    def clear(self) -> None:
        with self._lock:
            self._faults = []

    def count(self, verb: str, resource: str) -> None:
        with self._lock:
            self._counters[f"{verb} {resource}"] += 1

    def counters(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counters)

    def reset_counters(self) -> None:
        with self._lock:
            self._counters.clear()

    def _matching(self, path: str) -> list[Fault]:
        with self._lock:
            return [fault for fault in self._faults if fault.path.search(path)]

    def before_request(self, path: str) -> ApiError | None:
        """Sleep the injected latency; the error to answer with instead, if any."""
        for fault in self._matching(path):
            if fault.latency_ms:
                time.sleep(fault.latency_ms / 1000)
            if time.monotonic() < fault.outage_until:
                return injected_error(503)
            if fault.error_rate and self._random.random() < fault.error_rate:
                return injected_error(self._random.choice(fault.error_codes))
        return None

    def watch_mode(self, path: str) -> str | None:
        modes = [fault.watch for fault in self._matching(path) if fault.watch]
        return modes[-1] if modes else None
