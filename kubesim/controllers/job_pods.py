"""The Job controller's Pod bookkeeping: creating a Job's Pods from its template, deleting
them, and counting the finished ones through status.uncountedTerminatedPods and the
batch.kubernetes.io/job-tracking finalizer (trackJobStatusAndRemoveFinalizers)."""

from __future__ import annotations

import copy
import secrets
from typing import TYPE_CHECKING, Any

from kubesim.base import errors
from kubesim.controllers.job_failure import is_failed, match_pod_failure_policy
from kubesim.controllers.job_status import (
    INDEX_KEY,
    find_condition,
    intervals,
    new_condition,
    pod_phase,
    uncounted_status,
)
from kubesim.registry import graceful, pod_security
from kubesim.registry.admission import NAME_SUFFIX_ALPHABET
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import CONTROLLER_MANAGER, record_write

if TYPE_CHECKING:
    from kubesim.controllers.jobs import JobController

JOBS, PODS = kind_for("batch", "jobs"), kind_for("", "pods")
NAMESPACES = kind_for("", "namespaces")
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
API_BACKOFF_SECONDS = 1.0  # DefaultJobApiBackOff


def remove_tracking_finalizer(store: Any, pod: dict) -> bool:
    """Takes the tracking finalizer off a Pod (retrying conflicts); False if that failed."""
    finalizers = pod["metadata"].get("finalizers") or []
    if TRACKING_FINALIZER not in finalizers:
        return True
    for _ in range(5):
        before = copy.deepcopy(pod)
        kept = [f for f in pod["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER]
        pod["metadata"]["finalizers"] = kept
        if not kept:
            del pod["metadata"]["finalizers"]
        record_write(PODS, before, pod, CONTROLLER_MANAGER)
        try:
            store.update(PODS, pod)
            return True
        except errors.ApiError as error:
            if error.code == 404:
                return True
            if error.code != 409:
                return False
        try:
            pod = store.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
        except errors.ApiError:
            return True
    return False


class PodWrites:
    """The writes of one sync pass (Sync): its Pods and the Job's status."""

    c: JobController
    job: dict
    spec: dict
    status: dict
    uid: str
    key: str
    indexed: bool

    def _create_pod(self, index: int | None) -> dict | None:
        job, template = self.job, copy.deepcopy(self.spec.get("template") or {})
        namespace = self.c.store.get(NAMESPACES, None, job["metadata"]["namespace"])
        if namespace["metadata"].get("deletionTimestamp"):
            return None  # NamespaceTerminatingCause: every later create fails the same way
        name = job["metadata"]["name"]
        meta = template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        spec = template.get("spec") or {}
        generate = f"{name}-"
        if index is not None:
            annotations[INDEX_KEY] = str(index)
            labels[INDEX_KEY] = str(index)
            generate = f"{name}-{index}-"
            spec.setdefault("hostname", f"{name}-{index}")
            spec.setdefault("subdomain", self.spec.get("subdomain") or spec.get("subdomain"))
            if spec.get("subdomain") is None:
                spec.pop("subdomain")
            env = {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.labels['{INDEX_KEY}']",
                    }
                },
            }
            for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                container.setdefault("env", []).append(env)
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

        suffix = "".join(secrets.choice(NAME_SUFFIX_ALPHABET) for _ in range(5))
        metadata: dict[str, Any] = {
            "name": generate + suffix,
            "generateName": generate,
            "namespace": job["metadata"]["namespace"],
            "labels": labels,
            "finalizers": [TRACKING_FINALIZER],
            "ownerReferences": [owner],
        }
        if annotations:
            metadata["annotations"] = annotations
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        PODS.apply_defaults(pod)
        PODS.admit_new(pod)
        problems = PODS.validate(pod)
        if problems:
            detail = "; ".join(f"{p.field}: {p.detail or p.type}" for p in problems)
            self.c.event(job, "Warning", "FailedCreate", f"Error creating: {detail}")
            self._retry_create()
            return None
        record_write(PODS, None, pod, CONTROLLER_MANAGER)
        try:
            pod_security.admit(namespace, "pods", pod, self.c.pod_security_defaults, self.c.audit)
            created = self.c.store.create(PODS, pod)
        except errors.ApiError as error:
            self.c.event(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
            self._retry_create()
            return None
        self.c.create_failures.pop(self.uid, None)
        self.c.event(
            job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return created

    def _retry_create(self) -> None:
        """The sync's error puts the Job back in the rate-limited queue (DefaultJobApiBackOff
        1 s doubling, MaxJobApiBackOff 1 min)."""
        failures = self.c.create_failures.get(self.uid, 0)
        self.c.create_failures[self.uid] = failures + 1
        self.c.enqueue(self.key, min(API_BACKOFF_SECONDS * 2**failures, 60.0) / self.c.speed)

    def _delete_pod(self, pod: dict) -> None:
        meta = pod["metadata"]
        grace = graceful.pod_grace_seconds(pod, {})
        try:
            self.c.store.delete(PODS, meta["namespace"], meta["name"], grace=grace)
        except errors.ApiError:
            return
        self.c.event(self.job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    def _track(
        self,
        finish: dict | None,
        tracked: list[dict],
        uncounted_ok: set[str],
        uncounted_failed: set[str],
        succeeded_indexes: set[int],
    ) -> None:
        """trackJobStatusAndRemoveFinalizers: uncounted UIDs (and the interim condition)
        written first, finalizers removed, then the counters and the final condition."""
        job, status = self.job, self.status
        deleting = bool(job["metadata"].get("deletionTimestamp"))
        failing = finish is not None and finish["type"] == "FailureTarget"
        to_release = []
        for pod in tracked:
            uid = pod["metadata"]["uid"]
            failed_now = is_failed(pod, job)
            if not (deleting or finish is not None or pod_phase(pod) == "Succeeded" or failed_now):
                continue
            to_release.append(pod)
            if pod_phase(pod) == "Succeeded" and uid not in uncounted_failed:
                if not self.indexed:
                    uncounted_ok.add(uid)
            elif (
                (failed_now or failing)
                and uid not in uncounted_failed
                and match_pod_failure_policy(job, pod)[1]
            ):
                uncounted_failed.add(uid)
        if self.indexed:
            status["completedIndexes"] = intervals(succeeded_indexes)
            status["succeeded"] = len(succeeded_indexes)
        status["uncountedTerminatedPods"] = uncounted_status(uncounted_ok, uncounted_failed)
        interim = finish is not None and finish["type"] in ("FailureTarget", "SuccessCriteriaMet")
        if interim and finish is not None and not find_condition(job, finish["type"]):
            status.setdefault("conditions", []).append(finish)
        self.job = job = self._write(job)
        status = self.status = job["status"]
        released = {
            p["metadata"]["uid"] for p in to_release if remove_tracking_finalizer(self.c.store, p)
        }
        remaining_ok = uncounted_ok - released
        remaining_failed = uncounted_failed - released
        if not self.indexed:
            status["succeeded"] = status.get("succeeded", 0) + len(uncounted_ok - remaining_ok)
        status["failed"] = status.get("failed", 0) + len(uncounted_failed - remaining_failed)
        status["uncountedTerminatedPods"] = uncounted_status(remaining_ok, remaining_failed)
        ended = None
        # enactJobFinished: nothing left uncounted and (1.34) no Pod still terminating
        uncounted_left = remaining_ok or remaining_failed
        if finish is not None and not uncounted_left and not status.get("terminating"):
            kind = "Complete" if finish["type"] == "SuccessCriteriaMet" else "Failed"
            ended = new_condition(kind, finish["reason"], finish["message"])
            status.setdefault("conditions", []).append(ended)
            if kind == "Complete":
                status["completionTime"] = ended["lastTransitionTime"]
        self.job = self._write(job)
        if ended is None:
            return
        if ended["type"] == "Complete":
            completions = self.spec.get("completions")
            if completions is not None and status.get("succeeded", 0) > completions:
                message = "Too many succeeded pods running after completion count reached"
                self.c.event(self.job, "Warning", "TooManySucceededPods", message)
            self.c.event(self.job, "Normal", "Completed", "Job completed")
        else:
            self.c.event(self.job, "Warning", ended["reason"], ended["message"])

    def _write(self, job: dict) -> dict:
        try:
            stored = self.c.store.get(JOBS, job["metadata"]["namespace"], job["metadata"]["name"])
        except errors.ApiError:
            return job
        if stored["metadata"]["uid"] != self.uid:
            return job
        if stored.get("status") == job.get("status"):
            return stored
        updated = {**stored, "status": job["status"]}
        updated["metadata"] = dict(stored["metadata"])
        record_write(JOBS, stored, updated, CONTROLLER_MANAGER, "status")
        return self.c.store.update(JOBS, updated)
