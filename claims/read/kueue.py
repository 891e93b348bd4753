"""What the pages say of a Job that Kueue queues (claims/worker/kueue_steps.py writes it)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

from claims.models import KueueState, Workload


@dataclass(frozen=True)
class KueueLine:
    state: str  # KueueState
    label: str
    where: str  # "position 2 in LocalQueue team-a", or "queued by Kueue"
    message: str  # Kueue's own words, as it wrote them


def kueue_line(workload: Workload) -> KueueLine | None:
    """None for a workload Kueue does not queue (another cluster, a notebook)."""
    if not workload.kueue_queue or not workload.kueue_state:
        return None
    state = KueueState(workload.kueue_state)
    where = ""
    if state == KueueState.PENDING and workload.kueue_position:
        where = _("position %(position)d in LocalQueue %(queue)s") % {
            "position": workload.kueue_position,
            "queue": workload.kueue_queue,
        }
    elif state == KueueState.PENDING:
        where = _("queued by Kueue in LocalQueue %(queue)s") % {"queue": workload.kueue_queue}
    return KueueLine(state.value, str(state.label), where, workload.kueue_message)
