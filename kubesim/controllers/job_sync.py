"""One syncJob pass of the Job controller over one Job: counting its Pods, deciding whether
it finishes (podFailurePolicy, backoffLimit, activeDeadlineSeconds, completions), and how many
Pods it should run (parallelism, suspend, back-off, Indexed completion indexes)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kubesim.controllers.job_failure import (
    BACKOFF_LIMIT,
    DEADLINE,
    is_failed,
    match_pod_failure_policy,
    only_replace_failed,
)
from kubesim.controllers.job_pods import TRACKING_FINALIZER, PodWrites
from kubesim.controllers.job_status import (
    TERMINAL,
    completion_index,
    find_condition,
    is_ready,
    job_key,
    new_condition,
    parse_intervals,
    pod_phase,
)
from kubesim.registry.store import now_rfc3339

if TYPE_CHECKING:
    from kubesim.controllers.jobs import JobController

COMPLETIONS = ("CompletionsReached", "Reached expected number of succeeded pods")


class Sync(PodWrites):
    """One syncJob pass over one Job."""

    def __init__(self, controller: JobController, job: dict) -> None:
        self.c, self.job = controller, job
        self.spec = job["spec"]
        self.status = job.setdefault("status", {})
        self.uid = job["metadata"]["uid"]
        self.key = job_key(job)
        self.pods = controller.pods_of(job)
        self.indexed = self.spec.get("completionMode") == "Indexed"

    def run(self) -> None:
        job, spec, status, c = self.job, self.spec, self.status, self.c
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        uncounted_ok = set(uncounted.get("succeeded") or [])
        uncounted_failed = set(uncounted.get("failed") or [])
        tracked = [
            p for p in self.pods if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])
        ]
        active = [
            p
            for p in self.pods
            if pod_phase(p) not in TERMINAL and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = sum(
            1
            for p in self.pods
            if p["metadata"].get("deletionTimestamp") and pod_phase(p) not in TERMINAL
        )
        ready = sum(1 for p in active if is_ready(p))
        new_ok = [
            p
            for p in tracked
            if pod_phase(p) == "Succeeded" and p["metadata"]["uid"] not in uncounted_ok
        ]
        new_failed = [
            p for p in tracked if is_failed(p, job) and p["metadata"]["uid"] not in uncounted_failed
        ]
        counted_failed = [p for p in new_failed if match_pod_failure_policy(job, p)[1]]
        succeeded = status.get("succeeded", 0) + len(new_ok) + len(uncounted_ok)
        failed = status.get("failed", 0) + len(counted_failed) + len(uncounted_failed)
        suspended = bool(spec.get("suspend"))
        if not status.get("startTime") and not suspended:
            status["startTime"] = now_rfc3339()
            c.start_times[self.uid] = time.monotonic()
        c.backoff.record_finished(self.uid, len(new_ok), len(new_failed))

        finish = self._existing_finish()
        if finish is None:
            message = self._fail_job_message()
            if message:
                finish = new_condition("FailureTarget", "PodFailurePolicy", message)
        if finish is None:
            if failed > spec.get("backoffLimit", 6) or self._past_backoff_on_failure():
                finish = new_condition("FailureTarget", *BACKOFF_LIMIT)
            elif self._past_deadline(suspended):
                finish = new_condition("FailureTarget", *DEADLINE)
            elif spec.get("activeDeadlineSeconds") is not None and not suspended:
                left = (
                    c.started_at(job) + spec["activeDeadlineSeconds"] / c.speed - time.monotonic()
                )
                c.enqueue(self.key, max(left, 0.0) + 0.01)

        succeeded_indexes = self._succeeded_indexes() if self.indexed else set()
        if self.indexed:
            succeeded = len(succeeded_indexes)
        if finish is not None and finish["type"] != "SuccessCriteriaMet":
            for pod in active:
                self._delete_pod(pod)
            terminating += len(active)
            ready -= sum(1 for p in active if is_ready(p))
            active = []
        elif finish is None:
            if not job["metadata"].get("deletionTimestamp"):
                active, terminating, ready = self._manage(
                    active, terminating, ready, succeeded, succeeded_indexes
                )
            completions = spec.get("completions")
            done = succeeded > 0 if completions is None else succeeded >= completions
            if done and not active:
                finish = new_condition("SuccessCriteriaMet", *COMPLETIONS)
            elif not job["metadata"].get("deletionTimestamp"):
                self._suspended_condition(suspended)
        status["active"] = len(active)
        status["ready"] = ready
        status["terminating"] = terminating
        self._track(finish, tracked, uncounted_ok, uncounted_failed, succeeded_indexes)

    # -- decisions -------------------------------------------------------------------------

    def _existing_finish(self) -> dict | None:
        met = find_condition(self.job, "SuccessCriteriaMet")
        if met:
            return met
        target = find_condition(self.job, "FailureTarget")
        return target

    def _fail_job_message(self) -> str | None:
        if not self.spec.get("podFailurePolicy"):
            return None
        for pod in self.pods:
            if is_failed(pod, self.job):
                message = match_pod_failure_policy(self.job, pod)[0]
                if message:
                    return message
        return None

    def _past_backoff_on_failure(self) -> bool:
        template = (self.spec.get("template") or {}).get("spec") or {}
        if template.get("restartPolicy") != "OnFailure":
            return False
        restarts = sum(
            s.get("restartCount", 0)
            for p in self.pods
            if pod_phase(p) in ("Running", "Pending")
            for s in ((p.get("status") or {}).get("containerStatuses") or [])
            + ((p.get("status") or {}).get("initContainerStatuses") or [])
        )
        limit = self.spec.get("backoffLimit", 6)
        return restarts > 0 if limit == 0 else restarts >= limit

    def _past_deadline(self, suspended: bool) -> bool:
        seconds = self.spec.get("activeDeadlineSeconds")
        if seconds is None or suspended or not self.status.get("startTime"):
            return False
        return time.monotonic() - self.c.started_at(self.job) >= seconds / self.c.speed

    def _succeeded_indexes(self) -> set[int]:
        completions = self.spec.get("completions") or 0
        found = parse_intervals(self.status.get("completedIndexes", ""))
        for pod in self.pods:
            index = completion_index(pod)
            if pod_phase(pod) == "Succeeded" and index is not None and index < completions:
                found.add(index)
        return found

    def _manage(
        self,
        active: list[dict],
        terminating: int,
        ready: int,
        succeeded: int,
        succeeded_indexes: set[int],
    ) -> tuple[list[dict], int, int]:
        spec = self.spec
        if spec.get("suspend"):
            for pod in active:
                self._delete_pod(pod)
            return [], terminating + len(active), 0
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        if completions is None:
            want = len(active) if succeeded > 0 else parallelism
        else:
            want = max(min(completions - succeeded, parallelism), 0)
        if len(active) > want:
            extra = sorted(active, key=is_ready)[: len(active) - want]
            for pod in extra:
                self._delete_pod(pod)
            kept = [p for p in active if p not in extra]
            return kept, terminating + len(extra), ready - sum(1 for p in extra if is_ready(p))
        blocking = terminating if only_replace_failed(self.job) else 0
        missing = want - blocking - len(active)
        if missing <= 0:
            return active, terminating, ready
        wait = self.c.backoff.remaining(self.uid)
        if wait > 0:
            self.c.enqueue(self.key, wait + 0.01)
            return active, terminating, ready
        indexes: list[int | None] = [None] * missing
        if self.indexed:
            taken = succeeded_indexes | {i for i in map(completion_index, active) if i is not None}
            free = [i for i in range(completions or 0) if i not in taken]
            indexes = list(free[:missing])
        for index in indexes:
            created = self._create_pod(index)
            if created is not None:
                active.append(created)
        return active, terminating, ready

    def _suspended_condition(self, suspended: bool) -> None:
        """ensureJobConditionStatus for Suspended, with its event; resuming restarts the
        clock of activeDeadlineSeconds (startTime)."""
        conditions = self.status.setdefault("conditions", [])
        found = next((c for c in conditions if c.get("type") == "Suspended"), None)
        wanted = "True" if suspended else "False"
        if (found is None and not suspended) or (found and found.get("status") == wanted):
            return
        reason, message = (
            ("JobSuspended", "Job suspended") if suspended else ("JobResumed", "Job resumed")
        )
        stamp = now_rfc3339()
        condition = {
            "type": "Suspended",
            "status": wanted,
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }
        if found is None:
            conditions.append(condition)
        else:
            found.update(condition)
        self.c.event(self.job, "Normal", "Suspended" if suspended else "Resumed", message)
        if not suspended:
            self.status["startTime"] = stamp
            self.c.start_times[self.uid] = time.monotonic()
