"""kube-controller-manager's TTL-after-finished controller (pkg/controller/ttlafterfinished):
a finished Job (Complete or Failed) with spec.ttlSecondsAfterFinished is deleted that long
after it finished (its Complete or Failed condition's time), with propagationPolicy
Foreground and a uid precondition, so its Pods go before it. Seconds are divided by `speed`.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubesim.base import errors
from kubesim.controllers.garbage import FOREGROUND
from kubesim.controllers.jobs import JOBS, _condition


def finish_time(job: dict) -> str | None:
    for kind in ("Complete", "Failed"):
        condition = _condition(job, kind)
        if condition:
            return condition.get("lastTransitionTime")
    return None


class TTLAfterFinished:
    def __init__(self, store: Any, speed: float = 1.0) -> None:
        self.store = store
        self.speed = max(float(speed or 1.0), 0.001)
        self._due: list[tuple[float, str, str, str]] = []
        self._finished_at: dict[str, float] = {}  # uid: monotonic time it was seen finished
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="kubesim-ttl", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> TTLAfterFinished:
        for job in self.store.list(JOBS, copy=False)[0]:
            self._on_event("ADDED", JOBS, job)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=2)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural != "jobs" or event == "DELETED":
            return
        ttl = (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished = finish_time(obj)
        meta = obj["metadata"]
        if ttl is None or not finished or meta.get("deletionTimestamp"):
            return
        uid = meta["uid"]
        if uid not in self._finished_at:
            when = datetime.strptime(finished, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            ago = max((datetime.now(UTC) - when).total_seconds() - 1.0, 0.0)
            self._finished_at[uid] = time.monotonic() - ago / self.speed
        due = self._finished_at[uid] + ttl / self.speed
        with self._wake:
            heapq.heappush(self._due, (due, meta["namespace"], meta["name"], uid))
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and (not self._due or self._due[0][0] > time.monotonic()):
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                if self._stopping:
                    return
                _, namespace, name, uid = heapq.heappop(self._due)
            with contextlib.suppress(errors.ApiError):
                self._expire(namespace, name, uid)

    def _expire(self, namespace: str, name: str, uid: str) -> None:
        """processJob: still the same finished Job, and its TTL passed: delete it."""
        job = self.store.get(JOBS, namespace, name)
        if job["metadata"]["uid"] != uid or job["metadata"].get("deletionTimestamp"):
            return
        if not finish_time(job) or (job.get("spec") or {}).get("ttlSecondsAfterFinished") is None:
            return
        self._finished_at.pop(uid, None)
        self.store.delete(JOBS, namespace, name, finalizer=FOREGROUND)
