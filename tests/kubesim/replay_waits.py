"""The `wait` conditions of the recordings: polled with GETs before a step is sent.

"then 1 s" and a bare "2 s" are pauses of the recording (to let a real controller act or
to show that nothing happens); the replay waits for the condition only: kubesim's
controllers write what the recordings show together with the state the condition names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fixtures.kubesim import wait_until

TIMEOUT = 15.0


def _namespace(path: str) -> str:
    match = re.search(r"/namespaces/([^/?]+)", path)
    return match[1] if match else ""


def _pods(replay: Any, step: dict) -> list[str]:
    """The Pods a condition is about: the step's own Pod, or the Pods created before."""
    path = step["request"]["path"].split("?")[0]
    match = re.search(r"/namespaces/([^/]+)/pods/([^/]+)$", path)
    if match:
        return [f"{match[1]}/{match[2]}"]
    namespace = _namespace(path)
    created = [key for key in replay.created_pods if key.startswith(namespace + "/")]
    return created if "both" in step["wait"] else created[-1:]


def _pod_holds(replay: Any, key: str, check: Callable[[dict], bool]) -> bool:
    namespace, name = key.split("/")
    status, pod = replay.client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return status == 200 and check(pod)


def _scheduled_false(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _pod_check(text: str) -> Callable[[dict], bool] | None:
    if "PodScheduled=False" in text:
        return _scheduled_false
    if "resourceClaimStatuses" in text:
        return lambda pod: bool(
            pod["spec"].get("nodeName") and pod.get("status", {}).get("resourceClaimStatuses")
        )
    if "spec.nodeName" in text or "is bound" in text:
        return lambda pod: bool(pod["spec"].get("nodeName"))
    return None


def _deallocated(obj: dict) -> bool:
    status = obj.get("status") or {}
    return not status.get("allocation") and not obj["metadata"].get("finalizers")


def _has_condition(kind: str) -> Callable[[dict], bool]:
    def check(obj: dict) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)

    return check


def _condition(replay: Any, step: dict) -> Callable[[], bool] | None:
    text = step["wait"]
    path = replay.substitute_path(step["request"]["path"].split("?")[0])
    if "ServiceAccount 'default'" in text:
        account = f"/api/v1/namespaces/{_namespace(path)}/serviceaccounts/default"
        return lambda: replay.client.get(account)[0] == 200
    check = _pod_check(text)
    if check is not None:
        pods = _pods(replay, step)
        return lambda: all(_pod_holds(replay, key, check) for key in pods)
    if "gone" in text:
        return lambda: replay.client.get(path)[0] == 404
    if "no status.allocation" in text:
        return lambda: _deallocated(replay.client.get(path)[1] or {"metadata": {"x": 1}})
    match = re.search(r"condition (\w+)=True", text)
    if match:
        has = _has_condition(match[1])
        return lambda: has(replay.client.get(path)[1] or {})
    return None


def wait_for(replay: Any, step: dict) -> bool:
    """Poll the step's wait condition; False if it never held within TIMEOUT seconds."""
    check = _condition(replay, step)
    if check is None:
        return True
    try:
        wait_until(check, timeout=TIMEOUT, interval=0.05)
    except AssertionError:
        return False
    return True
