"""The `wait` conditions of the recordings: polled with GETs before a step is sent.

"then 1 s" and a bare "2 s" are pauses of the recording (to let a real controller act or
to show that nothing happens); the replay waits for the condition only: kubesim's
controllers write what the recordings show together with the state the condition names.
The observations of scenario 06 have no `wait` but were recorded each time something had
changed; the replay waits for the change the recording shows (see _observation).
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


OBSERVATION = re.compile(r"^(.*-observation-\d+-)")


def _observation(replay: Any, step: dict) -> Callable[[], bool] | None:
    """An observation of scenario 06 (GETs recorded together, each time something changed):
    before its first GET, wait until every GET of the group answers with the recorded status
    and the recorded resourceVersion pattern: an object the recording shows unchanged still
    has the resourceVersion it had, one it shows changed has a new one."""
    match = OBSERVATION.match(step["id"])
    if not match or step["request"]["method"] != "GET":
        return None
    group = [s for s in replay.scenario["steps"] if s["id"].startswith(match[1])]
    if group[0]["id"] != step["id"]:
        return None
    return lambda: all(_observed_as_recorded(replay, s) for s in group)


def _observed_as_recorded(replay: Any, step: dict) -> bool:
    status, body = replay.client.get(replay.substitute_path(step["request"]["path"]))
    recorded = step["response"]
    if status != recorded["status"]:
        return False
    if status != 200:
        return True
    placeholder = recorded["body"]["metadata"]["resourceVersion"]
    known = replay.normaliser.rvs  # every resourceVersion answered so far → its placeholder
    real = (body or {}).get("metadata", {}).get("resourceVersion", "")
    if real in known:
        return known[real] == placeholder
    return placeholder not in known.values()


def wait_for(replay: Any, step: dict) -> bool:
    """Poll the step's wait condition; False if it never held within TIMEOUT seconds."""
    check = _condition(replay, step) if step.get("wait") else _observation(replay, step)
    if check is None:
        return True
    try:
        wait_until(check, timeout=TIMEOUT, interval=0.05)
    except AssertionError:
        return False
    return True
