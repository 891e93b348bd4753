"""Fault injection (latency, errors, outages, broken watches, a node's kubelet down) and
request counters.

A node fault (`{"node": NAME, "kubelet": "down" | "unreachable"}`) plays a kubelet the API
server cannot reach: its process stopped (the dial is refused) or its machine gone (no route
to host). Reading a log there fails as the API server's proxy fails, and the node's kubelet
does nothing (no status, no confirmed deletion) until the fault is cleared.
"""

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
# What a dial to the kubelet's port ends in (Go's net errors, ECONNREFUSED / EHOSTUNREACH).
KUBELET_DIAL_ERRORS = {
    "down": "connect: connection refused",
    "unreachable": "connect: no route to host",
}


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


@dataclass
class NodeFault:
    node: str
    kubelet: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


def parse_fault(spec: dict[str, Any]) -> Fault | NodeFault:
    if "node" in spec:
        return _parse_node_fault(spec)
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


def _parse_node_fault(spec: dict[str, Any]) -> NodeFault:
    node, kubelet = spec.get("node"), spec.get("kubelet")
    if not isinstance(node, str) or not node or kubelet not in KUBELET_DIAL_ERRORS:
        raise bad_request(
            'invalid fault: a node fault needs "node" and "kubelet": "down" or "unreachable"'
        )
    return NodeFault(node=node, kubelet=kubelet)


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._node_changed = threading.Condition(self._lock)
        self._faults: list[Fault] = []
        self._node_faults: list[NodeFault] = []
        self._counters: Counter[str] = Counter()
        self._random = random.Random()

    def add(self, fault: Fault | NodeFault) -> str:
        with self._lock:
            if isinstance(fault, NodeFault):
                self._node_faults.append(fault)
                self._node_changed.notify_all()
            else:
                self._faults.append(fault)
        return fault.id

    def clear(self) -> None:
        with self._lock:
            self._faults = []
            self._node_faults = []
            self._node_changed.notify_all()

    def kubelet_fault(self, node: str) -> str | None:
        """ "down" or "unreachable" while the node's kubelet cannot be reached, else None."""
        with self._lock:
            modes = [fault.kubelet for fault in self._node_faults if fault.node == node]
        return modes[-1] if modes else None

    def wait_for_node_change(self, timeout: float) -> None:
        with self._node_changed:
            self._node_changed.wait(timeout)

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
