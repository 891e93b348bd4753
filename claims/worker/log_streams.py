"""Follow the logs of running verification Pods with follow=true streams, one per container,
and of the `main` container of each running workload's Pod.

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

from claims.domain import run_observations, workload_observations
from claims.kube.gateway import ClusterGateway, KubeError, PodState
from claims.models import RunLog, VerificationRun, Workload, WorkloadLog

log = logging.getLogger(__name__)

Key = tuple[int, str]  # (run id, container), or (workload id, WORKLOAD_STREAM)


# A workload's stream, by its id: no container of a run is named so (a DNS label has no ":").
WORKLOAD_STREAM = "workload:main"


class LogStream:
    def __init__(
        self,
        gateway: ClusterGateway,
        pod: PodState,
        container: str,
        since: datetime | None,
        write: Callable[[list[tuple[datetime, str]]], None],
        name: str,
    ) -> None:
        self.pod_name, self.container, self.write = pod.name, container, write
        self.lines: list[tuple[datetime, str]] = []
        self._lock = threading.Lock()
        self._shutdown: list[Callable[[], None]] = []
        self.thread = threading.Thread(
            target=self._read, args=(gateway, pod, since), name=name, daemon=True
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
            log.info("log stream of %s %s ended: %s", self.pod_name, self.container, error)

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


def _run_stream(
    gateway: ClusterGateway, run: VerificationRun, pod: PodState, container: str
) -> LogStream:
    since = (
        RunLog.objects.filter(run=run, container=container)
        .values_list("last_timestamp", flat=True)
        .first()
    )

    def write(lines: list[tuple[datetime, str]]) -> None:
        run_observations.run_logs_appended(run=run, container=container, lines=lines)

    return LogStream(gateway, pod, container, since, write, f"log-{run.pk}-{container}")


def _workload_stream(gateway: ClusterGateway, workload: Workload, pod: PodState) -> LogStream:
    since = (
        WorkloadLog.objects.filter(workload=workload, pod_name=pod.name)
        .values_list("last_timestamp", flat=True)
        .first()
    )

    def write(lines: list[tuple[datetime, str]]) -> None:
        workload_observations.workload_logs_appended(
            workload=workload, pod_name=pod.name, lines=lines
        )

    return LogStream(gateway, pod, Workload.CONTAINER, since, write, f"log-w{workload.pk}")


class LogStreams:
    """The streams of one cluster's running verification Pods and workloads' Pods."""

    def __init__(self, gateway: ClusterGateway) -> None:
        self.gateway = gateway
        self.streams: dict[Key, LogStream] = {}

    def update(self, running: list[tuple[VerificationRun, PodState]]) -> None:
        """Stream each running container of these runs; stop (and flush) the other runs'."""
        wanted = {
            (run.pk, container.name): (run, pod)
            for run, pod in running
            if pod.phase == "Running"
            for container in pod.containers
            if container.state == "running" and container.name in VerificationRun.CONTAINERS
        }
        runs = [key for key in self.streams if key[1] != WORKLOAD_STREAM]
        for key in [key for key in runs if key not in wanted]:
            self._end(key)
        for key, (run, pod) in wanted.items():
            if key not in self.streams:
                self.streams[key] = _run_stream(self.gateway, run, pod, key[1])

    def update_workloads(self, running: list[tuple[Workload, PodState]]) -> None:
        """Stream the `main` container of each of these workloads' Pods while it runs (a Job's
        retry: its new Pod's); stop (and flush) the others."""
        wanted = {
            (workload.pk, WORKLOAD_STREAM): (workload, pod)
            for workload, pod in running
            if pod.phase == "Running"
            and any(c.name == Workload.CONTAINER and c.state == "running" for c in pod.containers)
        }
        ours = [key for key in self.streams if key[1] == WORKLOAD_STREAM]
        for key in ours:
            if key not in wanted or self.streams[key].pod_name != wanted[key][1].name:
                self._end(key)
        for key, (workload, pod) in wanted.items():
            if key not in self.streams:
                self.streams[key] = _workload_stream(self.gateway, workload, pod)

    def streamed(self) -> frozenset[Key]:
        return frozenset(key for key, stream in self.streams.items() if stream.alive)

    def flush(self) -> None:
        """Write what the streams read since the last flush (the cluster loop's thread)."""
        for stream in list(self.streams.values()):
            lines = stream.take()
            if lines:
                stream.write(lines)

    def _end(self, key: Key) -> None:
        stream = self.streams.pop(key)
        stream.stop()
        lines = stream.take()
        if lines:
            stream.write(lines)

    def stop(self) -> None:
        for key in list(self.streams):
            self._end(key)
