"""Pod status as the kubelet reports it: container states, phase, conditions."""

import hashlib
from typing import Any

from kubesim.registry.store import now_rfc3339 as now


def waiting(reason: str, message: str = "") -> dict:
    state = {"reason": reason}
    if message:
        state["message"] = message
    return {"waiting": state}


def running() -> dict:
    return {"running": {"startedAt": now()}}


def terminated(exit_code: int, started_at: str) -> dict:
    reason = "Completed" if exit_code == 0 else "Error"
    return {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": now(),
        }
    }


def unknown_terminated() -> dict:
    """A container that never ran, as the status manager's TerminatePod reports it."""
    return {
        "terminated": {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
            "startedAt": None,
            "finishedAt": None,
        }
    }


def phase(states: list[dict], restart_policy: str, last_states: list[dict] | None = None) -> str:
    """The pod phase from its container states, as the kubelet's getPhase decides it: any
    container still waiting (never started) keeps the pod Pending, even while another runs;
    one waiting to restart after it ran counts as stopped."""
    last_states = last_states or [{} for _ in states]
    running = waiting = stopped = succeeded = unknown = 0
    for state, last in zip(states, last_states, strict=True):
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"]["exitCode"] == 0
        elif "waiting" in state:
            if "terminated" in last:
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1
    if waiting:
        return "Pending"
    if running and not unknown:
        return "Running"
    if not running and stopped and not unknown:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        return "Failed" if restart_policy == "Never" else "Running"
    return "Pending"


KEPT = ("DisruptionTarget",)


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> dict:
    condition = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
    }
    if not ok and reason:
        condition["reason"] = reason
    if not ok and message:
        condition["message"] = message
    return condition


def _keep_transition_times(old: list[dict], new: list[dict]) -> list[dict]:
    previous = {c["type"]: c for c in old}
    for condition in new:
        before = previous.get(condition["type"])
        if before and before.get("status") == condition["status"]:
            condition["lastTransitionTime"] = before.get("lastTransitionTime")
    return new


def conditions(pod: dict, states: dict[str, dict], pod_phase: str) -> list[dict]:
    unready = [name for name, state in states.items() if "running" not in state]
    ready = not unready
    if pod_phase in ("Succeeded", "Failed"):
        # GenerateContainersReadyCondition: a terminal phase gives its own reason.
        reason, message = ("PodCompleted" if pod_phase == "Succeeded" else "PodFailed"), ""
    else:
        reason = "ContainersNotReady"
        message = f"containers with unready status: [{' '.join(unready)}]"
    new = [
        _condition("PodReadyToStartContainers", pod_phase not in ("Succeeded", "Failed")),
        _condition("Initialized", True),
        _condition("Ready", ready, reason, message),
        _condition("ContainersReady", ready, reason, message),
        _condition("PodScheduled", True),
    ]
    if pod_phase in ("Succeeded", "Failed"):
        new[0]["status"] = "False"
    kept = [c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] in KEPT]
    new += kept  # conditions others set (the eviction's DisruptionTarget) stay
    return _keep_transition_times((pod.get("status") or {}).get("conditions") or [], new)


def container_status(container: dict, state: dict, last: dict, restarts: int, pod_uid: str) -> dict:
    image = container.get("image", "")
    status: dict[str, Any] = {
        "name": container["name"],
        "image": image,
        "imageID": "",
        "ready": "running" in state,
        "restartCount": restarts,
        "started": "running" in state,
        "state": state,
        "lastState": last or {},
    }
    never_ran = state.get("terminated", {}).get("reason") == "ContainerStatusUnknown"
    if ("waiting" not in state or restarts) and not never_ran:
        seed = f"{pod_uid}/{container['name']}/{restarts}".encode()
        status["containerID"] = "containerd://" + hashlib.sha256(seed).hexdigest()
        digest = hashlib.sha256(image.encode()).hexdigest()
        status["imageID"] = f"{image.split(':')[0]}@sha256:{digest}"
    return status


def node_ip(node_name: str) -> str:
    """The node's InternalIP, which its pods report as hostIP."""
    return f"10.0.0.{sum(map(ord, node_name)) % 200 + 10}"


def _addresses(pod: dict, uid: str) -> dict:
    node_name = pod["spec"].get("nodeName", "")
    node_index = sum(map(ord, node_name)) % 200
    host, address = node_ip(node_name), f"10.244.{node_index}.{int(uid[:2], 16) + 2}"
    return {
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": address,
        "podIPs": [{"ip": address}],
    }


def build(pod: dict, run: Any) -> dict:
    """The pod's status from a kubelet PodRun (states, last states, restart counts)."""
    names = [c["name"] for c in run.containers]
    states = {name: run.states[name] for name in names}
    last = [run.last_states.get(name, {}) for name in names]
    pod_phase = phase(list(states.values()), run.restart_policy, last)
    status = dict(pod.get("status") or {})
    if run.failure:  # the active deadline (or another kubelet eviction) ended the pod
        pod_phase = "Failed"
        status["reason"], status["message"] = run.failure
    status.update(_addresses(pod, run.uid))
    status["phase"] = pod_phase
    status["conditions"] = conditions(pod, states, pod_phase)
    status["startTime"] = run.start_time
    status.setdefault("qosClass", "BestEffort")
    status["containerStatuses"] = [
        container_status(
            c,
            states[c["name"]],
            run.last_states.get(c["name"], {}),
            run.restarts[c["name"]],
            run.uid,
        )
        for c in run.containers
    ]
    return status
