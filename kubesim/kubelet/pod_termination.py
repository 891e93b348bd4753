"""How the kubelet ends a Pod that was deleted gracefully, and confirms the deletion.

The API server only marks a bound Pod (`deletionTimestamp`, `deletionGracePeriodSeconds`);
its kubelet stops the containers (`Killing`; a CUDA sample ignores SIGTERM and runs on until it
exits by itself or the grace period ends with SIGKILL, exit code 137), reports the Pod in a
terminal phase (Succeeded only if every container exited 0) and then deletes it with grace
period 0, which removes it. Containers that never ran end as `ContainerStatusUnknown`. Like
every kubesim duration, the grace period is divided by the kubelet's `speed`.

Nothing else removes a bound Pod (graceful.py): while its node's kubelet is down or
unreachable, the Pod stays Terminating past its grace period and keeps its claims reserved,
until the kubelet is back, or someone deletes it with grace period 0.
"""

from typing import Any

from kubesim.base.errors import ApiError
from kubesim.kubelet import deadline, pod_status
from kubesim.registry.kinds import kind_for

PODS = kind_for("", "pods")


class Deleted(Exception):
    """The Pod was deleted gracefully: stop its containers, then confirm the deletion."""


def check(pod: dict) -> None:
    """Raise Deleted once the Pod carries a deletionTimestamp."""
    if pod["metadata"].get("deletionTimestamp"):
        raise Deleted


def end(run: Any) -> None:
    """Stop the running containers within the grace period, report the terminal phase and
    delete the Pod for good (the kubelet's final DELETE, grace period 0)."""
    run.kubelet.wait_for_node()
    pod = run._pod()
    running = [name for name, state in run.states.items() if "running" in state]
    for name in running:
        run.event("Normal", "Killing", f"Stopping container {name}")
    grace = pod["metadata"].get("deletionGracePeriodSeconds") or 0
    deadline.stop(run, running, grace / run.kubelet.speed)
    for name, state in run.states.items():
        if "terminated" not in state:
            run.states[name] = pod_status.unknown_terminated()
    run.restart_policy = "Never"  # a terminating Pod's containers are not restarted
    run.kubelet.wait_for_node()
    run.write()
    run._pod()  # still the same Pod (uid), as the kubelet's delete precondition checks
    try:
        run.store.delete(PODS, *run.key, grace=0)
    except ApiError:
        return  # gone already (a forced delete)
