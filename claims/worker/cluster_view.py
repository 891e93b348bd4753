"""What a cluster holds of the portal's objects, seen two ways that read alike: straight from
the API server (LiveView: one list per kind, for a one-off look) or from the cluster loop's
informers (CachedView: no request at all). The sync pass and the reconciler take either."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.utils import timezone

from claims.kube import parsing, pod_parsing
from claims.kube.gateway import (
    ClaimState,
    ClusterGateway,
    JobState,
    PermanentKubeError,
    PodState,
)
from claims.kube.kueue import KueueWorkload, kueue_workload
from claims.models import VerificationRun, Workload, managed_selector
from claims.worker.run_pods import Pods

if TYPE_CHECKING:
    from claims.kube.informer import Informer
    from claims.worker.log_streams import LogStreams

log = logging.getLogger(__name__)

Obj = dict[str, Any]
S = TypeVar("S")
# The kinds the reconciler checks only for presence and ownership (parsing.metadata_only).
CHECKED_KINDS = ("Namespace", "ServiceAccount", "RoleBinding", "ResourceQuota")


@dataclass
class Listed(Generic[S]):
    """The objects of one kind the cluster held, and when it held exactly those."""

    items: list[S]
    at: datetime


class ClusterView(Protocol):
    # Whether the sync reads the inventory itself when it is stale (the loop's informers
    # keep it current otherwise).
    reads_inventory: bool

    def claims(self) -> Listed[ClaimState]: ...

    def pods(self) -> Listed[PodState]: ...

    def jobs(self) -> list[JobState] | None:
        """The portal's Jobs; None when not known (not allowed, not yet listed): the
        workloads then follow their Pods alone this time."""
        ...

    def kueue_workloads(self) -> list[KueueWorkload] | None:
        """Kueue's Workloads (where the cluster runs Kueue); None when not known."""
        ...

    def owned(self, kind: str) -> list[Obj] | None:
        """The portal's objects of kind (CHECKED_KINDS, Pod, ResourceClaim) as
        parsing.metadata_only; None when not known (not served, not allowed, not yet
        listed): whoever asks then leaves that kind alone this time."""
        ...

    def follow_logs(self, runs: list[VerificationRun], pods: Pods) -> frozenset[tuple[int, str]]:
        """Stream the logs of the runs' running containers where it can (the streams of
        containers that ended are stopped and flushed first); the (run id, container) it
        streams, which the sync does not read."""
        ...

    def follow_workload_logs(
        self, running: list[tuple[Workload, PodState]]
    ) -> frozenset[tuple[int, str]]:
        """The same for workloads, each with the Pod it follows now."""
        ...


def _as_metadata(state: ClaimState | PodState) -> Obj:
    metadata = {"name": state.name, "namespace": state.namespace, "uid": state.uid}
    return {"metadata": metadata | {"labels": state.labels}}


class LiveView:
    """Straight from the API server: one list call per kind asked for."""

    reads_inventory = True

    def __init__(self, gateway: ClusterGateway) -> None:
        self.gateway = gateway

    def claims(self) -> Listed[ClaimState]:
        at = timezone.now()
        return Listed(self.gateway.list_claims(managed_selector()), at)

    def pods(self) -> Listed[PodState]:
        at = timezone.now()
        return Listed(self.gateway.list_pods(managed_selector()), at)

    def jobs(self) -> list[JobState] | None:
        found = self.owned_objects("Job")
        return None if found is None else [pod_parsing.job_state(obj) for obj in found]

    def kueue_workloads(self) -> list[KueueWorkload] | None:
        try:
            return [
                kueue_workload(obj) for obj in self.gateway.list_with_version("Workload", "")[0]
            ]
        except PermanentKubeError as error:
            log.warning("cannot list Kueue's Workloads: %s", error.message)
            return None

    def owned(self, kind: str) -> list[Obj] | None:
        found = self.owned_objects(kind)
        return None if found is None else [parsing.metadata_only(obj) for obj in found]

    def owned_objects(self, kind: str) -> list[Obj] | None:
        try:
            found = self.gateway.list_with_version(kind, managed_selector())[0]
        except PermanentKubeError as error:
            # A kind this cluster does not serve (404) or the portal may not list (403).
            if error.status not in (403, 404):
                raise
            log.warning("cannot list %s: %s", kind, error.message)
            return None
        return found

    def follow_logs(self, runs: list[VerificationRun], pods: Pods) -> frozenset[tuple[int, str]]:
        return frozenset()

    def follow_workload_logs(
        self, running: list[tuple[Workload, PodState]]
    ) -> frozenset[tuple[int, str]]:
        return frozenset()


class AllocationsSeen:
    """The claims' informer parses through this: it keeps the last allocated state of each
    claim since the last pass. A cache holds only the latest state, and a short Pod's claim may
    be allocated and freed again between two passes; replayed once, that allocation is still
    seen (in use for a moment, and which GPU the run got), as a watch delivered it."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], ClaimState] = {}
        self._lock = threading.Lock()

    def parse(self, obj: Obj) -> ClaimState:
        state = parsing.claim_state(obj)
        if state.allocated:
            with self._lock:
                self._states[(state.namespace, state.name)] = state
        return state

    def replay(self, items: list[ClaimState]) -> tuple[list[ClaimState], bool]:
        """items, each freed claim as it was last allocated since the last call; and whether
        any was (its freeing is then still to be seen, by another pass)."""
        with self._lock:
            seen, self._states = self._states, {}
        replayed = [
            seen[key]
            if not item.allocated
            and (key := (item.namespace, item.name)) in seen
            and seen[key].uid == item.uid
            else item
            for item in items
        ]
        return replayed, any(a is not b for a, b in zip(replayed, items, strict=True))


class CachedView:
    """From the cluster loop's informers: no request to the cluster."""

    reads_inventory = False

    def __init__(
        self,
        claims: Informer[ClaimState],
        pods: Informer[PodState],
        checked: dict[str, Informer[Obj]],
        streams: LogStreams,
        allocations: AllocationsSeen,
        jobs: Informer[JobState] | None = None,
    ) -> None:
        self._claims, self._pods, self._checked, self._streams = claims, pods, checked, streams
        self._allocations, self._jobs = allocations, jobs
        self.kueue: Informer[KueueWorkload] | None = None  # where the cluster runs Kueue
        self.replayed = False  # the last claims() replayed an allocation: pass again

    def ready(self) -> bool:
        return self._claims.current_at is not None and self._pods.current_at is not None

    def claims(self) -> Listed[ClaimState]:
        items, at = self._claims.snapshot()
        assert at is not None  # ready() before use
        items, self.replayed = self._allocations.replay(items)
        return Listed(items, at)

    def pods(self) -> Listed[PodState]:
        items, at = self._pods.snapshot()
        assert at is not None
        return Listed(items, at)

    def jobs(self) -> list[JobState] | None:
        if self._jobs is None:
            return None
        items, at = self._jobs.snapshot()
        return None if at is None else items

    def kueue_workloads(self) -> list[KueueWorkload] | None:
        if self.kueue is None:
            return None
        items, at = self.kueue.snapshot()
        return None if at is None else items

    def owned(self, kind: str) -> list[Obj] | None:
        if kind in ("Pod", "ResourceClaim"):
            informer: Informer[Any] = self._pods if kind == "Pod" else self._claims
            items, at = informer.snapshot()
            return None if at is None else [_as_metadata(state) for state in items]
        if kind not in self._checked:
            return None  # not watched by the loop: a one-off look (LiveView) lists it
        items, at = self._checked[kind].snapshot()
        return None if at is None else items

    def follow_logs(self, runs: list[VerificationRun], pods: Pods) -> frozenset[tuple[int, str]]:
        self._streams.update(
            [
                (run, pods[(run.claim.namespace, run.pod_name)])
                for run in runs
                if (run.claim.namespace, run.pod_name) in pods
            ]
        )
        return self._streams.streamed()

    def follow_workload_logs(
        self, running: list[tuple[Workload, PodState]]
    ) -> frozenset[tuple[int, str]]:
        self._streams.update_workloads(running)
        return self._streams.streamed()
