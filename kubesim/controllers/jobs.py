"""kube-controller-manager's Job controller (pkg/controller/job/job_controller.go, v1.34).

A Job's Pods are made from its template: generateName `<job>-` (Indexed: `<job>-<index>-`),
the template's labels (the Job strategy put the Job's uid and name among them), the
batch.kubernetes.io/job-tracking finalizer and a controller ownerReference; an Indexed Job's
Pods also get the batch.kubernetes.io/job-completion-index annotation and label, their
hostname and JOB_COMPLETION_INDEX. Each SuccessfulCreate event says `Created pod: <name>`.

Finished Pods are counted as upstream does: first written to
status.uncountedTerminatedPods, then their finalizers removed, then moved to
succeeded/failed. A failed Pod is one in phase Failed, or (podReplacementPolicy
TerminatingOrFailed, no pod failure policy) one being deleted that had not succeeded.
Replacements of failed Pods wait for the pod failure back-off (10 s doubling per failure
since the last success, at most 10 min). The Job fails by podFailurePolicy (a FailJob rule;
Ignore rules keep a failure from counting, Count and FailIndex count it), backoffLimit
(BackoffLimitExceeded) or activeDeadlineSeconds (DeadlineExceeded, its active Pods deleted):
first the FailureTarget condition, Failed once no Pod is terminating; it succeeds with
SuccessCriteriaMet, then Complete with status.completionTime. Events: Completed `Job
completed`, or the failure's reason and message as a Warning.

Simplified: no adoption or release of Pods by selector (only Pods this controller created,
by their controller reference, are the Job's), no backoffLimitPerIndex, successPolicy,
podFailurePolicy's FailIndex acts as Count, no expectations (the store is read directly,
so there is no stale cache to guard), the Pods skip ResourceQuota admission (Pod Security's
enforce refuses them as it would any Pod: a FailedCreate event, retried after 1 s doubling).
Every duration (back-off, deadline) is divided by `speed`.

This module holds the controller (its queue, orphaned Pods, events, the clocks); one sync
pass is job_sync.py, its Pod and status writes job_pods.py, the failure rules and back-off
job_failure.py, the status helpers job_status.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

from kubesim.base import errors
from kubesim.base.workqueue import DelayingQueueController
from kubesim.controllers.job_failure import Backoff
from kubesim.controllers.job_pods import JOBS, PODS, TRACKING_FINALIZER, remove_tracking_finalizer
from kubesim.controllers.job_status import controller_ref, find_condition, finished, job_key
from kubesim.controllers.job_sync import Sync
from kubesim.registry import events as event_names
from kubesim.registry import pod_security
from kubesim.registry.kinds import kind_for
from kubesim.registry.store import now_rfc3339

__all__ = ["JOBS", "JobController", "controller_ref", "find_condition", "finished"]

log = logging.getLogger(__name__)
EVENTS = kind_for("", "events")
COMPONENT = "job-controller"


class JobController(DelayingQueueController):
    """One thread syncing Jobs by key (namespace/name), some after a delay."""

    thread_name = "kubesim-jobs"

    def __init__(
        self,
        store: Any,
        speed: float = 1.0,
        pod_security_defaults: dict[str, str] | None = None,
        audit: pod_security.AuditLog | None = None,
    ) -> None:
        self.speed = max(float(speed or 1.0), 0.001)
        # Pod Security admission meets the Job's Pods as any Pod created through the API.
        self.pod_security_defaults = pod_security_defaults or {}
        self.audit = audit or pod_security.AuditLog()
        self.create_failures: dict[str, int] = {}  # uid: failed creates in a row
        self.backoff = Backoff(self.speed)
        self.start_times: dict[str, float] = {}  # uid: monotonic start, for activeDeadlineSeconds
        super().__init__(store)

    def initial_names(self) -> list[str]:
        return [job_key(job) for job in self.store.list(JOBS, copy=False)[0]]

    def start(self) -> JobController:
        for pod in self.store.list(PODS, copy=False)[0]:
            self._on_event("ADDED", PODS, pod)
        return super().start()

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "jobs":
            self.enqueue(job_key(obj))
        elif ref.plural == "pods":
            owner = controller_ref(obj)
            tracked = TRACKING_FINALIZER in (obj["metadata"].get("finalizers") or [])
            if owner and owner.get("kind") == "Job":
                namespace = obj["metadata"].get("namespace", "")
                self.enqueue(f"{namespace}/{owner['name']}")
            if tracked and (not owner or obj["metadata"].get("deletionTimestamp")):
                self.enqueue("pod:" + job_key(obj))  # perhaps an orphan: its finalizer goes

    def process(self, key: str) -> None:
        try:
            self.sync(key)
        except errors.ApiError as error:
            if error.code == 409:
                self.enqueue(key, 0.05)
        except Exception:  # a controller keeps running whatever one Job holds
            log.exception("syncing job %s", key)

    def sync(self, key: str) -> None:
        if key.startswith("pod:"):
            self._sync_orphan(*key[4:].split("/", 1))
        else:
            self._sync_job(*key.split("/", 1))

    # -- orphans ------------------------------------------------------------------------------

    def _sync_orphan(self, namespace: str, name: str) -> None:
        """syncOrphanPod: a Pod whose Job is gone (or finished) loses its tracking finalizer."""
        try:
            pod = self.store.get(PODS, namespace, name)
        except errors.ApiError:
            return
        owner = controller_ref(pod)
        if owner and owner.get("kind") == "Job":
            job = self._job_by_uid(namespace, owner)
            if job is not None and not finished(job):
                return
        remove_tracking_finalizer(self.store, pod)

    def _job_by_uid(self, namespace: str, owner: dict) -> dict | None:
        try:
            job = self.store.get(JOBS, namespace, owner["name"])
        except errors.ApiError:
            return None
        return job if job["metadata"]["uid"] == owner.get("uid") else None

    # -- one Job --------------------------------------------------------------------------------

    def _sync_job(self, namespace: str, name: str) -> None:
        try:
            job = self.store.get(JOBS, namespace, name)
        except errors.ApiError:
            return
        uid = job["metadata"]["uid"]
        if finished(job):
            self.backoff.forget(uid)
            self.start_times.pop(uid, None)
            for pod in self.pods_of(job):  # pods that finish after the Job did
                if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
                    remove_tracking_finalizer(self.store, pod)
            return
        Sync(self, job).run()

    def pods_of(self, job: dict) -> list[dict]:
        uid = job["metadata"]["uid"]
        pods, _ = self.store.list(PODS, job["metadata"]["namespace"])
        return [p for p in pods if (controller_ref(p) or {}).get("uid") == uid]

    def event(self, job: dict, event_type: str, reason: str, message: str) -> None:
        meta, stamp = job["metadata"], now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{event_names.unique_nanoseconds():x}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": event_type,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": "",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        with contextlib.suppress(errors.ApiError):
            self.store.create(EVENTS, event)

    def started_at(self, job: dict) -> float:
        """The monotonic time of status.startTime (remembered when the controller set it)."""
        uid = job["metadata"]["uid"]
        if uid not in self.start_times:
            stamp = (job.get("status") or {}).get("startTime")
            if stamp:
                when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                ago = (datetime.now(UTC) - when).total_seconds()
                self.start_times[uid] = time.monotonic() - ago / self.speed
            else:
                self.start_times[uid] = time.monotonic()
        return self.start_times[uid]
