"""State changes the cluster reports about workloads: applied, running, ended, cleaned up.

Called by the worker (claims.worker.workload_steps) like claims.domain.run_observations:
each change goes through claims.domain.transitions, the actor is the system, and every
function is safe to call twice.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext_noop

from claims.domain import state_messages
from claims.domain.transitions import change, update_fields
from claims.models import Workload


def workload_applying(*, workload: Workload) -> bool:
    return change(workload, "apply", message=gettext_noop("Applying its manifests."))


def workload_applied(*, workload: Workload, uid: str) -> bool:
    return change(
        workload,
        "applied",
        message=gettext_noop("Created in the cluster; waiting for its Pod to start."),
        kube_uid=uid,
    )


def workload_failed(*, workload: Workload, message: str) -> bool:
    return change(workload, "fail", message=message, finished_at=timezone.now())


def workload_running(*, workload: Workload, node: str, started_at: datetime | None) -> bool:
    return change(
        workload,
        "running",
        message=state_messages.RUNNING_ON % {"node": node},
        node=node,
        started_at=started_at or timezone.now(),
    )


def workload_succeeded(*, workload: Workload, finished_at: datetime | None) -> bool:
    return change(
        workload,
        "succeeded",
        message=gettext_noop("Finished successfully."),
        finished_at=finished_at or timezone.now(),
    )


def workload_cleaned_up(*, workload: Workload) -> None:
    update_fields(workload, cleaned_up_at=timezone.now())


# --- The queue (claims/worker/queue_steps.py) ---


def workload_suspended(*, workload: Workload) -> None:
    """Its Job is (about to be) created suspended: its claim waits its turn for devices."""
    update_fields(workload, suspended=True)


def workload_resumed(*, workload: Workload) -> None:
    update_fields(
        workload,
        suspended=False,
        state_message=gettext_noop("Its turn in the queue came: its Job was resumed."),
    )
