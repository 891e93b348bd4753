"""What the gateway makes of a Pod's Warning Events, and the edges of its log reads."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from claims.kube.errors import PermanentKubeError
from claims.kube.resources import Obj


def _since_seconds(since: datetime) -> int:
    # Rounded up and padded: the cluster's clock may trail ours; extra lines are dropped anyway.
    age = (datetime.now(UTC) - since).total_seconds()
    return max(1, math.ceil(age) + 2)


def _drop_cut_off_line(body: bytes, limit_bytes: int) -> bytes:
    """A log cut at limitBytes ends mid-line; leave that line for the next read."""
    if len(body) < limit_bytes or body.endswith(b"\n") or b"\n" not in body:
        return body
    return body[: body.rindex(b"\n") + 1]


def _is_waiting_to_start(error: PermanentKubeError) -> bool:
    return error.status == 400 and (
        "waiting to start" in error.message or "ContainerCreating" in error.message
    )


@dataclass(frozen=True)
class PodEvent:
    reason: str
    message: str
    at: str  # when last seen (RFC 3339), as the cluster wrote it
    count: int
    type: str = "Warning"  # or Normal

    def as_warning(self) -> dict:
        """What a run keeps of a Warning Event (VerificationRun.pod_warnings)."""
        return {"reason": self.reason, "message": self.message, "at": self.at, "count": self.count}


def _pod_event(event: Obj) -> PodEvent:
    # A recurring event counts up in series.count (events.k8s.io) or count (core/v1).
    series = event.get("series") or {}
    at = (
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
    count = int(series.get("count") or event.get("count") or 1)
    reason, message = str(event.get("reason") or ""), str(event.get("message") or "")
    return PodEvent(reason, message, at, count, str(event.get("type") or "Normal"))


def _newest_first(items: list[Obj]) -> list[PodEvent]:
    """Events newest first, to the second (the kubelet's core/v1 Events carry whole seconds,
    the scheduler's microseconds); within one second the one listed later (Events are named
    <object>.<UnixNano in hex>, so a list is in the order they were made)."""
    events = [(event.at[:19], index, event) for index, event in enumerate(map(_pod_event, items))]
    return [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]), reverse=True)]


def _by_time(event: PodEvent) -> str:
    # RFC 3339 in UTC sorts as text once the fraction is the same length (MicroTime has one).
    return event.at.replace("Z", ".000000Z") if "." not in event.at else event.at
