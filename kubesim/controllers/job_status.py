"""What the Job controller reads from a Job's and its Pods' status, and the status pieces it
writes (conditions, completedIndexes intervals, uncountedTerminatedPods)."""

from __future__ import annotations

import contextlib

from kubesim.registry.store import now_rfc3339

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
TERMINAL = ("Succeeded", "Failed")


def job_key(obj: dict) -> str:
    """The work queue's key of an object: namespace/name."""
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def controller_ref(obj: dict) -> dict | None:
    for owner in obj["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return owner
    return None


def find_condition(job: dict, kind: str) -> dict | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def finished(job: dict) -> bool:
    return bool(find_condition(job, "Complete") or find_condition(job, "Failed"))


def new_condition(kind: str, reason: str, message: str) -> dict:
    stamp = now_rfc3339()
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def is_ready(pod: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def pod_phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def intervals(indexes: set[int]) -> str:
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


def parse_intervals(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        first, _, last = part.partition("-")
        with contextlib.suppress(ValueError):
            found.update(range(int(first), int(last or first) + 1))
    return found


def completion_index(pod: dict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


def uncounted_status(succeeded: set[str], failed: set[str]) -> dict:
    found: dict[str, list[str]] = {}
    if succeeded:
        found["succeeded"] = sorted(succeeded)
    if failed:
        found["failed"] = sorted(failed)
    return found
