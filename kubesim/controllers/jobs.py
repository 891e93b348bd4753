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
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import logging
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubesim.base import errors
from kubesim.registry import events as event_names
from kubesim.registry import graceful, pod_security
from kubesim.registry.admission import NAME_SUFFIX_ALPHABET
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import CONTROLLER_MANAGER, record_write
from kubesim.registry.store import now_rfc3339

log = logging.getLogger(__name__)
JOBS, PODS, EVENTS = kind_for("batch", "jobs"), kind_for("", "pods"), kind_for("", "events")
NAMESPACES = kind_for("", "namespaces")
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10.0, 600.0  # DefaultJobPodFailureBackOff, Max...
API_BACKOFF_SECONDS = 1.0  # DefaultJobApiBackOff
TERMINAL = ("Succeeded", "Failed")
BACKOFF_LIMIT = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETIONS = ("CompletionsReached", "Reached expected number of succeeded pods")


def controller_ref(obj: dict) -> dict | None:
    for owner in obj["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return owner
    return None


def _condition(job: dict, kind: str) -> dict | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def finished(job: dict) -> bool:
    return bool(_condition(job, "Complete") or _condition(job, "Failed"))


def _new_condition(kind: str, reason: str, message: str) -> dict:
    stamp = now_rfc3339()
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _ready(pod: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def only_replace_failed(job: dict) -> bool:
    spec = job["spec"]
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def is_failed(pod: dict, job: dict) -> bool:
    """isPodFailed: phase Failed; or, replacing terminating Pods too, deleted unsucceeded."""
    if _phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return bool(pod["metadata"].get("deletionTimestamp")) and _phase(pod) != "Succeeded"


def _exit_code_matches(pod: dict, requirement: dict) -> dict | None:
    status = pod.get("status") or {}
    for statuses in (status.get("containerStatuses"), status.get("initContainerStatuses")):
        for container in statuses or []:
            terminated = (container.get("state") or {}).get("terminated")
            if not terminated or terminated.get("exitCode", 0) == 0:
                continue
            name = requirement.get("containerName")
            if name and name != container.get("name"):
                continue
            code, values = terminated["exitCode"], requirement.get("values") or []
            operator = requirement.get("operator")
            if (operator == "In" and code in values) or (
                operator == "NotIn" and code not in values
            ):
                return container
    return None


def match_pod_failure_policy(job: dict, pod: dict) -> tuple[str | None, bool, str | None]:
    """matchPodFailurePolicy: (FailJob message, whether the failure counts, the action)."""
    policy = job["spec"].get("podFailurePolicy")
    if not policy:
        return None, True, None
    meta = pod["metadata"]
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            container = _exit_code_matches(pod, rule["onExitCodes"])
            if container is None:
                continue
            code = container["state"]["terminated"]["exitCode"]
            message = (
                f"Container {container['name']} for pod {meta['namespace']}/{meta['name']} "
                f"failed with exit code {code} matching {action} rule at index {index}"
            )
        elif rule.get("onPodConditions") is not None:
            condition = next(
                (
                    c
                    for c in (pod.get("status") or {}).get("conditions") or []
                    for pattern in rule["onPodConditions"]
                    if c.get("type") == pattern.get("type")
                    and c.get("status") == (pattern.get("status") or "True")
                ),
                None,
            )
            if condition is None:
                continue
            message = (
                f"Pod {meta['namespace']}/{meta['name']} has condition {condition['type']} "
                f"matching {action} rule at index {index}"
            )
        else:
            continue
        if action == "Ignore":
            return None, False, action
        if action == "FailJob":
            return message, True, action
        return None, True, action  # Count, FailIndex
    return None, True, None


def _intervals(indexes: set[int]) -> str:
    """Indexes as the status writes them: "1,3-5,7"."""
    parts, ordered = [], sorted(indexes)
    start = prev = None
    for index in [*ordered, None]:
        if index is not None and prev is not None and index == prev + 1:
            prev = index
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = index
    return ",".join(parts)


def _parse_intervals(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        first, _, last = part.partition("-")
        with contextlib.suppress(ValueError):
            found.update(range(int(first), int(last or first) + 1))
    return found


def _index(pod: dict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


class JobController:
    """One thread syncing Jobs by key (namespace/name), some after a delay."""

    def __init__(
        self,
        store: Any,
        speed: float = 1.0,
        pod_security_defaults: dict[str, str] | None = None,
        audit: pod_security.AuditLog | None = None,
    ) -> None:
        self.store = store
        self.speed = max(float(speed or 1.0), 0.001)
        # Pod Security admission meets the Job's Pods as any Pod created through the API.
        self.pod_security_defaults = pod_security_defaults or {}
        self.audit = audit or pod_security.AuditLog()
        self._create_failures: dict[str, int] = {}  # uid: failed creates in a row
        self._due: list[tuple[float, str]] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._backoff: dict[str, tuple[int, float]] = {}  # uid: failures since a success, when
        self._started: dict[str, float] = {}  # uid: monotonic start, for activeDeadlineSeconds
        self._thread = threading.Thread(target=self._run, name="kubesim-jobs", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> JobController:
        for job in self.store.list(JOBS, copy=False)[0]:
            self.enqueue(self._key(job))
        for pod in self.store.list(PODS, copy=False)[0]:
            self._on_event("ADDED", PODS, pod)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=2)

    @staticmethod
    def _key(obj: dict) -> str:
        return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"

    def enqueue(self, key: str, delay: float = 0.0) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + delay, key))
            self._wake.notify_all()

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "jobs":
            self.enqueue(self._key(obj))
        elif ref.plural == "pods":
            owner = controller_ref(obj)
            tracked = TRACKING_FINALIZER in (obj["metadata"].get("finalizers") or [])
            if owner and owner.get("kind") == "Job":
                namespace = obj["metadata"].get("namespace", "")
                self.enqueue(f"{namespace}/{owner['name']}")
            if tracked and (not owner or obj["metadata"].get("deletionTimestamp")):
                self.enqueue("pod:" + self._key(obj))  # perhaps an orphan: its finalizer goes

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and (not self._due or self._due[0][0] > time.monotonic()):
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                if self._stopping:
                    return
                _, key = heapq.heappop(self._due)
                # client-go's queue dedupes only what is in it ("dirty"): an AddAfter waits
                # outside it until its time (delaying_queue.go's waitingForQueue), so an entry
                # for a later time (activeDeadlineSeconds' check) must not swallow this one.
                now = time.monotonic()
                pending = {k for due, k in self._due if k == key and due <= now}
            if key in pending:  # another entry due now syncs it again anyway
                continue
            try:
                if key.startswith("pod:"):
                    self._sync_orphan(*key[4:].split("/", 1))
                else:
                    self.sync(*key.split("/", 1))
            except errors.ApiError as error:
                if error.code == 409:
                    self.enqueue(key, 0.05)
            except Exception:  # a controller keeps running whatever one Job holds
                log.exception("syncing job %s", key)

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
        self._remove_finalizer(pod)

    def _job_by_uid(self, namespace: str, owner: dict) -> dict | None:
        try:
            job = self.store.get(JOBS, namespace, owner["name"])
        except errors.ApiError:
            return None
        return job if job["metadata"]["uid"] == owner.get("uid") else None

    def _remove_finalizer(self, pod: dict) -> bool:
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
                self.store.update(PODS, pod)
                return True
            except errors.ApiError as error:
                if error.code == 404:
                    return True
                if error.code != 409:
                    return False
            try:
                pod = self.store.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except errors.ApiError:
                return True
        return False

    # -- one Job --------------------------------------------------------------------------------

    def sync(self, namespace: str, name: str) -> None:
        try:
            job = self.store.get(JOBS, namespace, name)
        except errors.ApiError:
            return
        uid = job["metadata"]["uid"]
        if finished(job):
            self._backoff.pop(uid, None)
            self._started.pop(uid, None)
            for pod in self._pods(job):  # pods that finish after the Job did
                if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
                    self._remove_finalizer(pod)
            return
        Sync(self, job).run()

    def _pods(self, job: dict) -> list[dict]:
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
        if uid not in self._started:
            stamp = (job.get("status") or {}).get("startTime")
            if stamp:
                when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                ago = (datetime.now(UTC) - when).total_seconds()
                self._started[uid] = time.monotonic() - ago / self.speed
            else:
                self._started[uid] = time.monotonic()
        return self._started[uid]

    def backoff_remaining(self, uid: str) -> float:
        """getRemainingTime: wall seconds until a failed Pod may be replaced."""
        failures, last = self._backoff.get(uid, (0, 0.0))
        if not failures:
            return 0.0
        delay = min(BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS) / self.speed
        return max(last + delay - time.monotonic(), 0.0)

    def record_finished(self, uid: str, succeeded: int, failed: int) -> None:
        """newBackoffRecord: a success resets the failures; each failure adds one."""
        failures, last = self._backoff.get(uid, (0, 0.0))
        if succeeded and not failed:
            failures = 0
        if failed:
            failures, last = failures + failed, time.monotonic()
        self._backoff[uid] = (failures, last)


class Sync:
    """One syncJob pass over one Job."""

    def __init__(self, controller: JobController, job: dict) -> None:
        self.c, self.job = controller, job
        self.spec = job["spec"]
        self.status = job.setdefault("status", {})
        self.uid = job["metadata"]["uid"]
        self.key = JobController._key(job)
        self.pods = controller._pods(job)
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
            if _phase(p) not in TERMINAL and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = sum(
            1
            for p in self.pods
            if p["metadata"].get("deletionTimestamp") and _phase(p) not in TERMINAL
        )
        ready = sum(1 for p in active if _ready(p))
        new_ok = [
            p
            for p in tracked
            if _phase(p) == "Succeeded" and p["metadata"]["uid"] not in uncounted_ok
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
            c._started[self.uid] = time.monotonic()
        c.record_finished(self.uid, len(new_ok), len(new_failed))

        finish = self._existing_finish()
        if finish is None:
            message = self._fail_job_message()
            if message:
                finish = _new_condition("FailureTarget", "PodFailurePolicy", message)
        if finish is None:
            if failed > spec.get("backoffLimit", 6) or self._past_backoff_on_failure():
                finish = _new_condition("FailureTarget", *BACKOFF_LIMIT)
            elif self._past_deadline(suspended):
                finish = _new_condition("FailureTarget", *DEADLINE)
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
            ready -= sum(1 for p in active if _ready(p))
            active = []
        elif finish is None:
            if not job["metadata"].get("deletionTimestamp"):
                active, terminating, ready = self._manage(
                    active, terminating, ready, succeeded, succeeded_indexes
                )
            completions = spec.get("completions")
            done = succeeded > 0 if completions is None else succeeded >= completions
            if done and not active:
                finish = _new_condition("SuccessCriteriaMet", *COMPLETIONS)
            elif not job["metadata"].get("deletionTimestamp"):
                self._suspended_condition(suspended)
        status["active"] = len(active)
        status["ready"] = ready
        status["terminating"] = terminating
        self._track(finish, tracked, uncounted_ok, uncounted_failed, succeeded_indexes)

    # -- decisions -------------------------------------------------------------------------

    def _existing_finish(self) -> dict | None:
        met = _condition(self.job, "SuccessCriteriaMet")
        if met:
            return met
        target = _condition(self.job, "FailureTarget")
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
            if _phase(p) in ("Running", "Pending")
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
        found = _parse_intervals(self.status.get("completedIndexes", ""))
        for pod in self.pods:
            index = _index(pod)
            if _phase(pod) == "Succeeded" and index is not None and index < completions:
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
            extra = sorted(active, key=_ready)[: len(active) - want]
            for pod in extra:
                self._delete_pod(pod)
            kept = [p for p in active if p not in extra]
            return kept, terminating + len(extra), ready - sum(1 for p in extra if _ready(p))
        blocking = terminating if only_replace_failed(self.job) else 0
        missing = want - blocking - len(active)
        if missing <= 0:
            return active, terminating, ready
        wait = self.c.backoff_remaining(self.uid)
        if wait > 0:
            self.c.enqueue(self.key, wait + 0.01)
            return active, terminating, ready
        indexes: list[int | None] = [None] * missing
        if self.indexed:
            taken = succeeded_indexes | {i for i in map(_index, active) if i is not None}
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
            self.c._started[self.uid] = time.monotonic()

    # -- writes ----------------------------------------------------------------------------

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
        self.c._create_failures.pop(self.uid, None)
        self.c.event(
            job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return created

    def _retry_create(self) -> None:
        """The sync's error puts the Job back in the rate-limited queue (DefaultJobApiBackOff
        1 s doubling, MaxJobApiBackOff 1 min)."""
        failures = self.c._create_failures.get(self.uid, 0)
        self.c._create_failures[self.uid] = failures + 1
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
            if not (deleting or finish is not None or _phase(pod) == "Succeeded" or failed_now):
                continue
            to_release.append(pod)
            if _phase(pod) == "Succeeded" and uid not in uncounted_failed:
                if not self.indexed:
                    uncounted_ok.add(uid)
            elif (
                (failed_now or failing)
                and uid not in uncounted_failed
                and match_pod_failure_policy(job, pod)[1]
            ):
                uncounted_failed.add(uid)
        if self.indexed:
            status["completedIndexes"] = _intervals(succeeded_indexes)
            status["succeeded"] = len(succeeded_indexes)
        status["uncountedTerminatedPods"] = _uncounted(uncounted_ok, uncounted_failed)
        interim = finish is not None and finish["type"] in ("FailureTarget", "SuccessCriteriaMet")
        if interim and finish is not None and not _condition(job, finish["type"]):
            status.setdefault("conditions", []).append(finish)
        self.job = job = self._write(job)
        status = self.status = job["status"]
        released = {p["metadata"]["uid"] for p in to_release if self.c._remove_finalizer(p)}
        remaining_ok = uncounted_ok - released
        remaining_failed = uncounted_failed - released
        if not self.indexed:
            status["succeeded"] = status.get("succeeded", 0) + len(uncounted_ok - remaining_ok)
        status["failed"] = status.get("failed", 0) + len(uncounted_failed - remaining_failed)
        status["uncountedTerminatedPods"] = _uncounted(remaining_ok, remaining_failed)
        ended = None
        # enactJobFinished: nothing left uncounted and (1.34) no Pod still terminating
        uncounted_left = remaining_ok or remaining_failed
        if finish is not None and not uncounted_left and not status.get("terminating"):
            kind = "Complete" if finish["type"] == "SuccessCriteriaMet" else "Failed"
            ended = _new_condition(kind, finish["reason"], finish["message"])
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


def _uncounted(succeeded: set[str], failed: set[str]) -> dict:
    found: dict[str, list[str]] = {}
    if succeeded:
        found["succeeded"] = sorted(succeeded)
    if failed:
        found["failed"] = sorted(failed)
    return found
