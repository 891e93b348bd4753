"""kube-controller-manager's TTL-after-finished controller (pkg/controller/ttlafterfinished):
a finished Job (Complete or Failed) with spec.ttlSecondsAfterFinished is deleted that long
after it finished (its Complete or Failed condition's time), with propagationPolicy
Foreground and a uid precondition, so its Pods go before it. Seconds are divided by `speed`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from kubesim.base.workqueue import DelayingQueueController
from kubesim.controllers.garbage import FOREGROUND
from kubesim.controllers.job_status import find_condition
from kubesim.controllers.jobs import JOBS


def finish_time(job: dict) -> str | None:
    for kind in ("Complete", "Failed"):
        condition = find_condition(job, kind)
        if condition:
            return condition.get("lastTransitionTime")
    return None


class TTLAfterFinished(DelayingQueueController):
    """Keys namespace/name/uid, each due when its Job's TTL has passed."""

    thread_name = "kubesim-ttl"

    def __init__(self, store: Any, speed: float = 1.0) -> None:
        self.speed = max(float(speed or 1.0), 0.001)
        self._finished_at: dict[str, float] = {}  # uid: monotonic time it was seen finished
        super().__init__(store)

    def start(self) -> TTLAfterFinished:
        for job in self.store.list(JOBS, copy=False)[0]:
            self._on_event("ADDED", JOBS, job)
        return super().start()

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
        delay = self._finished_at[uid] + ttl / self.speed - time.monotonic()
        self.enqueue(f"{meta['namespace']}/{meta['name']}/{uid}", delay)

    def sync(self, key: str) -> None:
        """processJob: still the same finished Job, and its TTL passed: delete it."""
        namespace, name, uid = key.split("/", 2)
        job = self.store.get(JOBS, namespace, name)
        if job["metadata"]["uid"] != uid or job["metadata"].get("deletionTimestamp"):
            return
        if not finish_time(job) or (job.get("spec") or {}).get("ttlSecondsAfterFinished") is None:
            return
        self._finished_at.pop(uid, None)
        self.store.delete(JOBS, namespace, name, finalizer=FOREGROUND)
