"""The Job controller's failure rules: which Pods count as failed, the podFailurePolicy's
rules, and the pod failure back-off before a failed Pod is replaced (job_controller.go,
pod_failure_policy.go, backoff_utils.go)."""

from __future__ import annotations

import time

from kubesim.controllers.job_status import pod_phase

BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10.0, 600.0  # DefaultJobPodFailureBackOff, Max...
BACKOFF_LIMIT = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")


def only_replace_failed(job: dict) -> bool:
    spec = job["spec"]
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def is_failed(pod: dict, job: dict) -> bool:
    """isPodFailed: phase Failed; or, replacing terminating Pods too, deleted unsucceeded."""
    if pod_phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return bool(pod["metadata"].get("deletionTimestamp")) and pod_phase(pod) != "Succeeded"


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


class Backoff:
    """The back-off records, per Job uid: failures since the last success, and when."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._records: dict[str, tuple[int, float]] = {}

    def forget(self, uid: str) -> None:
        self._records.pop(uid, None)

    def remaining(self, uid: str) -> float:
        """getRemainingTime: wall seconds until a failed Pod may be replaced."""
        failures, last = self._records.get(uid, (0, 0.0))
        if not failures:
            return 0.0
        delay = min(BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS) / self.speed
        return max(last + delay - time.monotonic(), 0.0)

    def record_finished(self, uid: str, succeeded: int, failed: int) -> None:
        """newBackoffRecord: a success resets the failures; each failure adds one."""
        failures, last = self._records.get(uid, (0, 0.0))
        if succeeded and not failed:
            failures = 0
        if failed:
            failures, last = failures + failed, time.monotonic()
        self._records[uid] = (failures, last)
