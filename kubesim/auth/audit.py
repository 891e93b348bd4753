"""The authorization decisions the API server made, as its audit log records them (the
`authorization.k8s.io/decision` and `/reason` annotations of each audit event): who asked to
do what, and whether RBAC allowed it by which binding. Tests read it to see exactly which
permissions a client used (tests/claims/test_least_privilege.py)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

KEPT = 100_000  # the newest decisions; a bounded log, as an audit backend's buffer


@dataclass(frozen=True)
class Decision:
    user: str
    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    resource_request: bool
    allowed: bool
    reason: str


class DecisionLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decisions: deque[Decision] = deque(maxlen=KEPT)

    def record(self, attrs: Any, allowed: bool, reason: str) -> None:
        decision = Decision(
            attrs.user.name,
            attrs.verb,
            attrs.api_group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
            attrs.resource_request,
            allowed,
            reason,
        )
        with self._lock:
            self._decisions.append(decision)

    def of(self, user: str) -> list[Decision]:
        with self._lock:
            return [decision for decision in self._decisions if decision.user == user]
