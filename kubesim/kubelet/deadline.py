"""The kubelet's active deadline (pkg/kubelet/active_deadline.go) and how a pod ends by it.

Once a pod has been active on its node (since `status.startTime`) for
`spec.activeDeadlineSeconds`, the handler records a `DeadlineExceeded` event, the pod's
running containers are stopped (`Killing`; a process still running after the grace period
is killed, exit code 137), and only then the pod is reported `Failed` with reason
`DeadlineExceeded` (the status manager holds a terminal phase back while containers may
run). Containers that never ran end as `ContainerStatusUnknown` (status manager's
TerminatePod). Like every kubesim duration, the deadline is simulated time: the pod's
seconds divided by the kubelet's `speed`.
"""

import time
from typing import Any

from kubesim.kubelet import pod_status

REASON = "DeadlineExceeded"
MESSAGE = "Pod was active on the node longer than the specified deadline"
DEFAULT_GRACE_SECONDS = 30
KILLED_EXIT_CODE = 137


class Exceeded(Exception):
    """The pod has been active on its node longer than its activeDeadlineSeconds."""


def due(pod: dict, started: float, speed: float) -> float | None:
    """The monotonic time the pod's deadline passes, None without a deadline."""
    seconds = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return None
    return started + seconds / speed


def end(run: Any) -> None:
    """Stop the pod's containers and report it Failed / DeadlineExceeded."""
    run.event("Normal", REASON, MESSAGE)
    running = [name for name, state in run.states.items() if "running" in state]
    for name in running:
        run.event("Normal", "Killing", f"Stopping container {name}")
    stop(run, running, _grace_seconds(run))
    for name, state in run.states.items():
        if "terminated" not in state:
            run.states[name] = pod_status.unknown_terminated()
    run.failure = (REASON, MESSAGE)
    run.write()


def _grace_seconds(run: Any) -> float:
    spec = run._pod(copy=False).get("spec") or {}
    grace = spec.get("terminationGracePeriodSeconds")
    grace = DEFAULT_GRACE_SECONDS if not isinstance(grace, int) else grace
    return max(grace, 1) / run.kubelet.speed


def stop(run: Any, running: list[str], grace_seconds: float) -> None:
    """SIGTERM, which a CUDA sample as PID 1 ignores: each process runs on until it exits
    by itself or the grace period (wall-clock seconds) ends with SIGKILL. A Jupyter server
    handles it and exits 0 at once."""
    if not running:
        return
    now = time.monotonic()
    killed_at = now + grace_seconds
    ends = {
        name: now if run.results[name].stops_on_sigterm else run.ends.get(name, now)
        for name in running
    }
    run.kubelet.wait(max(min(max(ends.values()), killed_at) - now, 0.0))
    for name in running:
        started = run.states[name]["running"]["startedAt"]
        exit_code = run.results[name].exit_code if ends[name] <= killed_at else KILLED_EXIT_CODE
        run.states[name] = pod_status.terminated(exit_code, started)
