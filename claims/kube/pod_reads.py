"""The gateway's reads of one Pod: its Events (what the scheduler, the kubelet or a DRA driver
said about it) and its containers' logs, with the edges of those reads."""

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from claims.kube import pod_parsing
from claims.kube.connection import Connection
from claims.kube.errors import PermanentKubeError
from claims.kube.pod_parsing import LogLine
from claims.kube.resources import Obj, _object_path


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


class PodReads:
    """The gateway's reads of one Pod: its Events and its containers' logs (a part of
    ClusterGateway, which supplies the transport below)."""

    connection: Connection

    def _call(self, method: str, path: str, query: Obj | None = None, **kwargs: Any) -> bytes:
        raise NotImplementedError

    def _get_json(self, path: str, query: dict[str, Any] | None = None) -> Obj:
        raise NotImplementedError

    def list_pod_warnings(self, namespace: str, name: str, uid: str) -> list[PodEvent]:
        """The Warning Events about one Pod (this uid, not an earlier Pod of the name), newest
        first: what the scheduler, the kubelet or a DRA driver said about it. core/v1, where
        the events.k8s.io Events are stored too."""
        selector = f"involvedObject.name={name},type=Warning"
        if uid:
            selector += f",involvedObject.uid={uid}"
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
        items = self._get_json(path, {"fieldSelector": selector}).get("items") or []
        return sorted((_pod_event(item) for item in items), key=_by_time, reverse=True)

    def list_pod_events(self, namespace: str, name: str, uid: str) -> list[PodEvent]:
        """Every Event about one Pod (this uid), Normal and Warning, newest first: the
        scheduler's and DRA's complaints, and the kubelet's word on its images (Pulling,
        Pulled) and containers, in one list call."""
        selector = f"involvedObject.name={name}"
        if uid:
            selector += f",involvedObject.uid={uid}"
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
        items = self._get_json(path, {"fieldSelector": selector}).get("items") or []
        return _newest_first(items)

    def follow_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        since: datetime | None = None,
        on_open: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[LogLine]:
        """Log lines from `since` on (inclusive) as the container prints them, until it ends
        (the server closes the stream) or on_open's function ends the stream."""
        query: dict[str, Any] = {"container": container, "timestamps": "true", "follow": "true"}
        if since is not None:
            since = since if since.tzinfo else since.replace(tzinfo=UTC)
            query["sinceSeconds"] = _since_seconds(since)
        path = _object_path("v1", "Pod", namespace, pod) + "/log"
        # A quiet container is no sign of a dead stream: no read timeout (the follower ends
        # the stream when the Pod's status says the container ended).
        for line in self.connection.stream(path, query, None, on_open=on_open, accept="*/*"):
            yield from pod_parsing.log_lines(line, since)

    def read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        since: datetime | None = None,
        limit_bytes: int = 262144,
    ) -> list[LogLine]:
        """Log lines from `since` on (inclusive); [] while the container has not started."""
        query: dict[str, Any] = {
            "container": container,
            "timestamps": "true",
            "limitBytes": limit_bytes,
        }
        if since is not None:
            since = since if since.tzinfo else since.replace(tzinfo=UTC)
            query["sinceSeconds"] = _since_seconds(since)
        path = _object_path("v1", "Pod", namespace, pod) + "/log"
        try:
            body = self._call("GET", path, query, accept="*/*")
        except PermanentKubeError as e:
            if _is_waiting_to_start(e):
                return []
            raise
        return pod_parsing.log_lines(_drop_cut_off_line(body, limit_bytes), since)
