"""Follow the logs of running verification Pods with follow=true streams, one per container.

A stream's thread only reads; the cluster loop's thread writes what was read to the database
(flush), so log rows have one writer. A stream ends when its container ends (the API server
closes it) or when the loop stops it because the Pod's status says it ended; the
loop's sync then reads whatever came after the last line kept, as before streams.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from claims.domain import run_observations
from claims.kube.gateway import ClusterGateway, KubeError, PodState
from claims.models import RunLog, VerificationRun

log = logging.getLogger(__name__)

Key = tuple[int, str]  # (run id, container)


class LogStream:
    def __init__(
        self, gateway: ClusterGateway, run: VerificationRun, pod: PodState, container: str
    ) -> None:
        self.run, self.container = run, container
        self.lines: list[tuple[datetime, str]] = []
        self._lock = threading.Lock()
        self._shutdown: list[Callable[[], None]] = []
        since = (
            RunLog.objects.filter(run=run, container=container)
            .values_list("last_timestamp", flat=True)
            .first()
        )
        self.thread = threading.Thread(
            target=self._read,
            args=(gateway, pod, since),
            name=f"log-{run.pk}-{container}",
            daemon=True,
        )
        self.thread.start()

    def _read(self, gateway: ClusterGateway, pod: PodState, since: datetime | None) -> None:
        try:
            for line in gateway.follow_log(
                pod.namespace, pod.name, self.container, since=since, on_open=self._shutdown.append
            ):
                with self._lock:
                    self.lines.append((line.timestamp, line.text))
        except KubeError as error:  # the sync reads the log instead once the stream is gone
            log.info("log stream of run %s %s ended: %s", self.run.pk, self.container, error)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def take(self) -> list[tuple[datetime, str]]:
        with self._lock:
            lines, self.lines = self.lines, []
        return lines

    def stop(self) -> None:
        for shutdown in self._shutdown:
            shutdown()
        self.thread.join(timeout=5)


class LogStreams:
    """The streams of one cluster's running verification Pods."""

    def __init__(self, gateway: ClusterGateway) -> None:
        self.gateway = gateway
        self.streams: dict[Key, LogStream] = {}

    def update(self, running: list[tuple[VerificationRun, PodState]]) -> None:
        """Stream each running container of these runs; stop (and flush) the others."""
        wanted = {
            (run.pk, container.name): (run, pod)
            for run, pod in running
            if pod.phase == "Running"
            for container in pod.containers
            if container.state == "running" and container.name in VerificationRun.CONTAINERS
        }
        for key in [key for key in self.streams if key not in wanted]:
            self._end(key)
        for key, (run, pod) in wanted.items():
            if key not in self.streams:
                self.streams[key] = LogStream(self.gateway, run, pod, key[1])

    def streamed(self) -> frozenset[Key]:
        return frozenset(key for key, stream in self.streams.items() if stream.alive)

    def flush(self) -> None:
        """Write what the streams read since the last flush (the cluster loop's thread)."""
        for stream in list(self.streams.values()):
            lines = stream.take()
            if lines:
                run_observations.run_logs_appended(
                    run=stream.run, container=stream.container, lines=lines
                )

    def _end(self, key: Key) -> None:
        stream = self.streams.pop(key)
        stream.stop()
        lines = stream.take()
        if lines:
            run_observations.run_logs_appended(
                run=stream.run, container=stream.container, lines=lines
            )

    def stop(self) -> None:
        for key in list(self.streams):
            self._end(key)
