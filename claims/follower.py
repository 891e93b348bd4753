"""Follow each cluster by watching it, not by polling: claims/kube/informer.py keeps a cache
of the portal's ResourceClaims and Pods current, and every change runs one sync pass over those
caches through the same code (and observations) as the periodic sync. The logs of running
verification Pods come by follow=true streams (claims/log_streams.py).

One follower is active per cluster: it holds a lease on the Cluster row and renews it; a second
copy (another process, another machine) waits and takes over within a lease when the holder
dies. The periodic sync stays as a slow safety net (tasks.sync_all_clusters).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections
from django.db.models import Q
from django.utils import timezone

from claims import cluster_registry, reconciler, run_follower, sync
from claims.cluster_ops import gateway_for
from claims.kube import parsing
from claims.kube.gateway import ClaimState, ClusterGateway, DeviceClassInfo, KubeError, PodState
from claims.kube.informer import Informer
from claims.log_streams import LogStreams
from claims.models import Cluster, VerificationRun, managed_selector

log = logging.getLogger(__name__)

LOG_FLUSH_SECONDS = 0.2  # how often lines read by log streams are written
NEW_CLUSTER_SECONDS = 2.0  # how often follow_all looks for newly registered clusters


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


UNREACHABLE = "cannot reach the cluster"


def connection_of(cluster: Cluster) -> tuple[Any, ...]:
    """What the follower's gateway was built from: a change (an admin edited the cluster)
    means following anew with the new credentials."""
    return (
        cluster.kubeconfig_path,
        cluster.context,
        cluster.in_cluster,
        cluster.kubeconfig_encrypted,
    )


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def lease_seconds() -> float:
    return settings.FOLLOWER_LEASE_SECONDS


def take_lease(cluster_id: int, holder: str) -> bool:
    """Take or renew the cluster's follower lease; False while another holder's runs."""
    now = timezone.now()
    free = (
        Q(follower=holder) | Q(follower_lease_until__isnull=True) | Q(follower_lease_until__lt=now)
    )
    until = now + timedelta(seconds=lease_seconds())
    return bool(
        Cluster.objects.filter(free, pk=cluster_id).update(
            follower=holder, follower_lease_until=until
        )
    )


def release_lease(cluster_id: int, holder: str) -> None:
    Cluster.objects.filter(pk=cluster_id, follower=holder).update(
        follower="", follower_lease_until=None
    )


def followed_clusters() -> set[int]:
    """Clusters a live follower watches (the periodic sync leaves them to it)."""
    live = Cluster.objects.filter(follower_lease_until__gte=timezone.now())
    return set(live.values_list("pk", flat=True))


def unfollowed_clusters() -> list[str]:
    followed = followed_clusters()
    return [c.name for c in Cluster.objects.all() if c.pk not in followed]


class CachedLists:
    """sync.ClusterLists from the informers' caches: no request to the cluster."""

    def __init__(
        self, claims: Informer[ClaimState], pods: Informer[PodState], streams: LogStreams
    ) -> None:
        self._claims, self._pods, self._streams = claims, pods, streams

    def ready(self) -> bool:
        return self._claims.current_at is not None and self._pods.current_at is not None

    def claims(self) -> sync.Listed[ClaimState]:
        items, at = self._claims.snapshot()
        assert at is not None  # ready() before use
        return sync.Listed(items, at)

    def pods(self) -> sync.Listed[PodState]:
        items, at = self._pods.snapshot()
        assert at is not None
        return sync.Listed(items, at)

    def follow_logs(
        self, runs: list[VerificationRun], pods: run_follower.Pods
    ) -> frozenset[tuple[int, str]]:
        self._streams.update(
            [
                (run, pods[(run.claim.namespace, run.pod_name)])
                for run in runs
                if (run.claim.namespace, run.pod_name) in pods
            ]
        )
        return self._streams.streamed()


class Watches(NamedTuple):
    claims: Informer[ClaimState]
    pods: Informer[PodState]
    slices: Informer[dict[str, Any]]
    classes: Informer[DeviceClassInfo]
    namespaces: Informer[dict[str, Any]]


class ClusterFollower:
    """Follows one cluster while it holds the lease; waits for the lease otherwise."""

    def __init__(self, cluster_id: int, stop: threading.Event, holder: str = "") -> None:
        self.cluster_id = cluster_id
        self.stop = stop
        self.holder = holder or holder_name()
        self.changed = threading.Event()
        self.passes = 0
        self.log_streams: LogStreams | None = None
        self.inventory_changed = threading.Event()
        self.inventory: tuple[Informer[DeviceClassInfo], Informer[dict[str, Any]]]
        self.namespaces_changed = threading.Event()
        self.namespaces: Informer[dict[str, Any]] | None = None
        self.informers: tuple[Informer[Any], ...] = ()
        self.connection: tuple[Any, ...] = ()
        self.unreachable = False

    def run(self) -> None:
        try:
            while not self.stop.is_set() and Cluster.objects.filter(pk=self.cluster_id).exists():
                if take_lease(self.cluster_id, self.holder):
                    log.info("following cluster %s as %s", self.cluster_id, self.holder)
                    self._follow_or_wait()
                else:
                    self.stop.wait(lease_seconds() / 3)
        finally:
            release_lease(self.cluster_id, self.holder)
            connections.close_all()  # this thread's: it ends here

    def _follow_or_wait(self) -> None:
        try:
            self._follow()
        except (KubeError, ImproperlyConfigured) as error:
            # No connection can be made (a kubeconfig that does not load, no key to read
            # it): say so, and look again later rather than in a loop.
            log.warning("cannot follow cluster %s: %s", self.cluster_id, error)
            problem = cluster_registry.plain_words(str(error))
            cluster_registry.mark_unreachable(self.cluster_id, problem)
            self.stop.wait(lease_seconds() / 3)

    def _follow(self) -> None:
        cluster = Cluster.objects.filter(pk=self.cluster_id).first()
        if cluster is None:
            return  # removed meanwhile
        self.connection = connection_of(cluster)
        gateway = gateway_for(cluster)
        claims, pods, slices, classes, self.namespaces = informers = self.watches(gateway)
        self.informers = informers
        self.inventory = (classes, slices)
        streams = self.log_streams = LogStreams(gateway)
        lists = CachedLists(claims, pods, streams)
        for informer in informers:
            informer.start()
        try:
            self._sync_on_change(cluster, lists, streams)
        finally:
            for informer in informers:
                informer.stop()
            streams.stop()

    def watches(self, gateway: ClusterGateway) -> Watches:
        """Every list and watch the follower keeps open, not yet started (the ClusterRole
        must allow each: tests/claims/test_least_privilege.py starts these)."""
        selector = managed_selector()
        watch_seconds = settings.FOLLOWER_WATCH_SECONDS
        return Watches(
            Informer(
                gateway,
                "ResourceClaim",
                selector,
                parsing.claim_state,
                self.changed.set,
                watch_seconds=watch_seconds,
            ),
            Informer(
                gateway,
                "Pod",
                selector,
                parsing.pod_state,
                self.changed.set,
                watch_seconds=watch_seconds,
            ),
            # The inventory (GPU map, feasibility) follows the slices and classes the same way.
            Informer(gateway, "ResourceSlice", "", _as_is, self.inventory_changed.set),
            Informer(
                gateway, "DeviceClass", "", parsing.device_class_info, self.inventory_changed.set
            ),
            # The portal's namespaces: one deleted or relabelled behind its back is seen at once.
            Informer(
                gateway,
                "Namespace",
                selector,
                _as_is,
                self.namespaces_changed.set,
                watch_seconds=watch_seconds,
            ),
        )

    def _sync_on_change(self, cluster: Cluster, lists: CachedLists, streams: LogStreams) -> None:
        """One pass per burst of changes, and a slow one while runs are under way (their
        pending deadline); the logs of running containers come by stream and are written
        every LOG_FLUSH_SECONDS."""
        renew_every = lease_seconds() / 3
        renew_at = time.monotonic() + renew_every
        runs_under_way = True  # until the first pass says otherwise
        while not self.stop.is_set():
            wait = LOG_FLUSH_SECONDS if streams.streams else renew_every
            self.changed.wait(min(wait, max(renew_at - time.monotonic(), 0)))
            if self.stop.is_set():
                return
            streams.flush()
            self._refresh_inventory(cluster)
            self._check_namespaces(cluster)
            self._note_reachability()
            due = False
            if time.monotonic() >= renew_at:
                if not take_lease(self.cluster_id, self.holder):
                    log.warning("lost the lease of cluster %s", self.cluster_id)
                    return
                if self._connection_changed():
                    log.info("cluster %s has a new connection: following anew", cluster)
                    return
                renew_at = time.monotonic() + renew_every
                due = runs_under_way
                if not self._refreshed(cluster):
                    return  # removed: the lease goes with it, and so does this follower
            if not lists.ready() or not (self.changed.is_set() or due):
                continue
            self.changed.clear()
            outcome = self._pass(cluster, lists)
            if outcome is None:  # the periodic sync holds the cluster: try again shortly
                self.changed.set()
                self.stop.wait(settings.RUN_FOLLOW_INTERVAL_SECONDS)
            else:
                runs_under_way = outcome
                self.passes += 1

    def _note_reachability(self) -> None:
        """Unreachable since the first watch or list that could not reach it; reachable
        again when every cache is current (recorded on change only)."""
        errors = [i.error for i in self.informers if i.error and not i.watching]
        unreachable = next((e for e in errors if UNREACHABLE in e), "")
        if unreachable and not self.unreachable:
            cluster_registry.mark_unreachable(
                self.cluster_id, cluster_registry.plain_words(unreachable)
            )
        elif not errors and self.unreachable:
            cluster_registry.mark_reachable(self.cluster_id)
        self.unreachable = bool(unreachable) or (self.unreachable and bool(errors))

    def _connection_changed(self) -> bool:
        cluster = Cluster.objects.filter(pk=self.cluster_id).first()
        return cluster is None or connection_of(cluster) != self.connection

    def _refresh_inventory(self, cluster: Cluster) -> None:
        classes, slices = self.inventory
        if not self.inventory_changed.is_set() or not (classes.current_at and slices.current_at):
            return
        self.inventory_changed.clear()
        devices = parsing.devices_from_slices(slices.snapshot()[0])
        by_name = sorted(classes.snapshot()[0], key=lambda device_class: device_class.name)
        sync.inventory_seen(cluster, by_name, devices)

    def _check_namespaces(self, cluster: Cluster) -> None:
        namespaces = self.namespaces
        if namespaces is None or namespaces.current_at is None:
            return
        if not self.namespaces_changed.is_set():
            return
        self.namespaces_changed.clear()
        try:
            observed = namespaces.snapshot()[0]
            reconciler.namespaces_observed(cluster, gateway_for(cluster), observed)
        except KubeError as error:  # the reconciler's timer looks again
            log.warning("namespaces of cluster %s: %s", cluster, error)

    @staticmethod
    def _refreshed(cluster: Cluster) -> bool:
        """The cluster's row read again (what the periodic sync wrote); False once removed.
        Not at every pass: a pass comes with each change, and what it uses of the row, the
        inventory, this follower writes itself (_refresh_inventory)."""
        try:
            cluster.refresh_from_db()
        except Cluster.DoesNotExist:
            return False
        return True

    def _pass(self, cluster: Cluster, lists: CachedLists) -> bool | None:
        try:
            return sync.sync_from(cluster, lists)
        except Exception:  # a bad pass must not end the follower: it is tried again shortly
            log.exception("following cluster %s", cluster)
            self.changed.set()
            self.stop.wait(settings.RUN_FOLLOW_INTERVAL_SECONDS)
            return True


def follow_all(stop: threading.Event, *, look_every: float = NEW_CLUSTER_SECONDS) -> None:
    """Follow every registered cluster until stop is set; for the command. Clusters
    registered meanwhile are followed within `look_every` seconds (no restart), a removed
    one's follower ends, and each has a thread of its own: a dead cluster stalls no other."""
    running: dict[int, tuple[ClusterFollower, threading.Thread]] = {}
    while not stop.is_set():
        for cluster_id in Cluster.objects.values_list("pk", flat=True):
            if cluster_id not in running or not running[cluster_id][1].is_alive():
                follower = ClusterFollower(cluster_id, stop)
                thread = threading.Thread(
                    target=follower.run, name=f"follower-{cluster_id}", daemon=True
                )
                running[cluster_id] = follower, thread
                thread.start()
        close_old_connections()
        stop.wait(look_every)
    for follower, _ in running.values():
        follower.changed.set()  # it waits for a change (or its lease's renewal): stop now
    for _, thread in running.values():
        thread.join(timeout=lease_seconds())
    connections.close_all()
