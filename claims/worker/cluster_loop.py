"""One loop per cluster: it watches the cluster (claims/kube/informer.py keeps caches of the
portal's ResourceClaims, Pods, namespaces, ServiceAccounts, RoleBindings and ResourceQuotas, and
of the ResourceSlices and DeviceClasses) and feeds from those caches, with no list on a timer:

- the live state: a sync pass (claims/worker/sync.py) on every change of a claim or Pod, and
  the logs of running verification Pods by follow=true streams (log_streams.py);
- the reconciler (reconciler.py): drift on every change of a namespace, ServiceAccount or
  RoleBinding and on a resync from the caches every RECONCILE_INTERVAL_SECONDS; orphans every
  ORPHAN_SWEEP_INTERVAL_SECONDS;
- the inventory (GPU map, feasibility) on every change of a slice or class, or of what claims
  made outside the portal hold (another team's claims take GPUs too), and discovery
  (the server's versions) once the caches are current again after a watch broke (an
  upgraded control plane breaks them all) and every DISCOVERY_SECONDS;
- reachability: unreachable from the first watch or list that could not reach the cluster,
  refused from the first one it refused (401/403: the permissions it lacks are asked once per
  change), reachable again when every cache is current.

A loop runs while it holds the cluster's one lease (claims/worker/lease.py); a second copy
(another process, another machine) waits and takes over within a lease when the holder dies.
A full list happens only when a watch cannot resume (the server compacted its version).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections

from claims.clusters import registry as cluster_registry
from claims.clusters.gateways import gateway_for
from claims.kube import parsing
from claims.kube.gateway import (
    ClusterGateway,
    KubeError,
    TaintRule,
)
from claims.kube.resources import TAINT_RULE_VERSION
from claims.models import Cluster
from claims.worker import reconciler, sync
from claims.worker.cluster_view import AllocationsSeen, CachedView
from claims.worker.cluster_watches import Signals, Watches, open_watches
from claims.worker.lease import holder_name, lease_seconds, release_lease, take_lease
from claims.worker.log_streams import LogStreams

log = logging.getLogger(__name__)

LOG_FLUSH_SECONDS = 0.2  # how often lines read by log streams are written
NEW_CLUSTER_SECONDS = 2.0  # how often follow_all looks for newly registered clusters
DISCOVERY_SECONDS = 600.0  # discovery without a broken watch: a slow safety net


def connection_of(cluster: Cluster) -> tuple[Any, ...]:
    """What the loop's gateway was built from: a change (an admin edited the cluster)
    means following anew with the new credentials."""
    return (
        cluster.kubeconfig_path,
        cluster.context,
        cluster.in_cluster,
        cluster.kubeconfig_encrypted,
    )


def _rule_name(rule: TaintRule) -> str:
    return rule.name


class Timer:
    """Due every `seconds` (monotonic), first after one period."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.at = seconds, time.monotonic() + seconds

    def due(self) -> bool:
        if time.monotonic() < self.at:
            return False
        self.at = time.monotonic() + self.seconds
        return True

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0)


class ClusterLoop:
    """Follows one cluster while it holds the lease; waits for the lease otherwise."""

    def __init__(self, cluster_id: int, stop: threading.Event, holder: str = "") -> None:
        self.cluster_id = cluster_id
        self.stop = stop
        self.holder = holder or holder_name()
        self.wake = threading.Event()  # any change, or stop
        # What changed since the loop last looked: claims or Pods (a sync pass), the
        # inventory, or what the reconciler compares (a drift check).
        self.changed = threading.Event()
        self.inventory_changed = threading.Event()
        self.drift_changed = threading.Event()
        self.passes = self.checks = self.sweeps = 0  # what it did, for tests and benchmarks
        self.log_streams: LogStreams | None = None
        self.watched: Watches | None = None
        self.allocations = AllocationsSeen()
        self.connection: tuple[Any, ...] = ()
        self.unreachable = False
        # The kinds the cluster refuses to list (None: not known yet).
        self.refused: frozenset[str] | None = None
        self.rediscover = False  # a watch broke: discover again once the caches are current

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
        self._discover(cluster, gateway)
        taint_rules = TAINT_RULE_VERSION in cluster.resource_versions
        watched = self.watched = self.watches(gateway, taint_rules=taint_rules, kueue=cluster.kueue)
        streams = self.log_streams = LogStreams(gateway)
        view = CachedView(
            watched.claims, watched.pods, watched.checked, streams, self.allocations, watched.jobs
        )
        view.kueue = watched.kueue_workloads
        for informer in watched.all():
            informer.start()
        try:
            self._follow_changes(cluster, gateway, view)
        finally:
            for informer in watched.all():
                informer.stop()
            streams.stop()

    def _signal(self, flag: threading.Event) -> Any:
        def changed() -> None:
            flag.set()
            self.wake.set()

        return changed

    def watches(
        self, gateway: ClusterGateway, *, taint_rules: bool = False, kueue: bool = False
    ) -> Watches:
        """Every list and watch the loop keeps open, not yet started (cluster_watches.py)."""
        signals = Signals(
            ours=self._signal(self.changed),
            drift=self._signal(self.drift_changed),
            inventory=self._signal(self.inventory_changed),
        )
        return open_watches(
            gateway, self.allocations.parse, signals, taint_rules=taint_rules, kueue=kueue
        )

    def _follow_changes(self, cluster: Cluster, gateway: ClusterGateway, view: CachedView) -> None:
        """One pass per burst of changes, and a slow one while runs are under way (their
        pending deadline); the logs of running containers come by stream and are written
        every LOG_FLUSH_SECONDS; the timers of the lease, the resync, the sweep, discovery.
        Nothing here asks the cluster anything on a timer but discovery's slow one."""
        renewal = Timer(lease_seconds() / 3)
        resync = Timer(settings.RECONCILE_INTERVAL_SECONDS)
        sweep = Timer(settings.ORPHAN_SWEEP_INTERVAL_SECONDS)
        discovery = Timer(DISCOVERY_SECONDS)
        runs_under_way = True  # until the first pass says otherwise
        while not self.stop.is_set():
            streams = self.log_streams
            wait = LOG_FLUSH_SECONDS if streams and streams.streams else renewal.left()
            self.wake.wait(min(wait, renewal.left(), resync.left()))
            self.wake.clear()
            if self.stop.is_set():
                return
            if streams:
                streams.flush()
            self._refresh_inventory(cluster)
            self._note_reachability(cluster)
            self._note_refusals(gateway)
            due = False
            if renewal.due():
                if not take_lease(self.cluster_id, self.holder):
                    log.warning("lost the lease of cluster %s", self.cluster_id)
                    return
                if self._connection_changed():
                    log.info("cluster %s has a new connection: following anew", cluster)
                    return
                due = runs_under_way
                if not self._refreshed(cluster):
                    return  # removed: the lease goes with it, and so does this loop
            if discovery.due() or (self.rediscover and view.ready()):
                self._discover(cluster, gateway)
                if cluster.kueue != (view.kueue is not None):
                    log.info("cluster %s: Kueue came or went; following anew", cluster)
                    return  # its Workloads are watched (or no longer) from the next follow
            if view.ready():  # a kind not yet listed (or refused) is left out of the checks
                self._check(cluster, gateway, view, resync=resync.due(), sweep=sweep.due())
            if self._current() and not self.unreachable:
                sync.record_outcome(cluster, [], sync.LOOP_RECORDS_EVERY)  # current as of now
            if not view.ready() or not (self.changed.is_set() or due):
                continue
            self.changed.clear()
            runs_under_way = self._pass(cluster, view)
            self.passes += 1
            if view.replayed:  # the freeing of a replayed allocation is still to be seen
                self._signal(self.changed)()

    def _current(self) -> bool:
        return self.watched is not None and all(i.current_at for i in self.watched.all())

    def _check(
        self,
        cluster: Cluster,
        gateway: ClusterGateway,
        view: CachedView,
        *,
        resync: bool,
        sweep: bool,
    ) -> None:
        """The reconciler's look at the caches: drift on a change or the resync, orphans on
        the sweep's timer. A refusal is logged and looked at again at the next resync."""
        drift = self.drift_changed.is_set() or resync
        self.drift_changed.clear()
        try:
            if drift:
                reconciler.check_cluster(cluster, gateway, view)
                self.checks += 1
            if sweep:
                reconciler.sweep_cluster(cluster, gateway, view)
                self.sweeps += 1
        except KubeError as error:
            log.warning("reconciling cluster %s: %s", cluster, error)

    def _discover(self, cluster: Cluster, gateway: ClusterGateway) -> None:
        self.rediscover = False
        try:
            sync.discovery_seen(cluster, gateway)
        except KubeError as error:  # the informers say whether it answers
            log.warning("discovery of cluster %s: %s", cluster, error)

    def _note_reachability(self, cluster: Cluster) -> None:
        """Unreachable since the first watch or list that could not reach it; reachable
        again when every cache is current (recorded on change only)."""
        informers = self.watched.all() if self.watched else []
        errors = [i.error for i in informers if i.error and not i.watching]
        self.rediscover = self.rediscover or bool(errors)
        unreachable = next((e for e in errors if cluster_registry.UNREACHABLE in e), "")
        if unreachable and not self.unreachable:
            cluster_registry.mark_unreachable(
                self.cluster_id, cluster_registry.plain_words(unreachable)
            )
        elif not errors and self.unreachable:
            cluster_registry.mark_reachable(self.cluster_id)
        self.unreachable = bool(unreachable) or (self.unreachable and bool(errors))

    def _note_refusals(self, gateway: ClusterGateway) -> None:
        """Refused from the first list or watch the cluster refused (401/403), with the
        needed permissions the identity lacks, asked again only when what is refused changes;
        no longer once every cache is current (the permissions were granted)."""
        informers = self.watched.all() if self.watched else []
        refused = frozenset(i.kind for i in informers if i.refused)
        if refused == self.refused or (not refused and not self._current()):
            return
        self.refused = refused
        if not refused:
            log.info("cluster %s lets the portal list and watch what it needs", self.cluster_id)
            if not self.unreachable:
                cluster_registry.mark_reachable(self.cluster_id)
            return
        refusal = next(i.refusal for i in informers if i.refusal is not None)
        missing = cluster_registry.ask_missing(gateway) if refusal.status == 403 else []
        problem = cluster_registry.refusal_words(refusal, missing)
        log.warning("cluster %s refuses the portal: %s", self.cluster_id, problem)
        cluster_registry.mark_refused(self.cluster_id, problem, [str(p) for p in missing])

    def _connection_changed(self) -> bool:
        cluster = Cluster.objects.filter(pk=self.cluster_id).first()
        return cluster is None or connection_of(cluster) != self.connection

    def _refresh_inventory(self, cluster: Cluster) -> None:
        watched = self.watched
        if watched is None or not self.inventory_changed.is_set():
            return
        if not all(i.current_at for i in watched.inventory()):
            return
        self.inventory_changed.clear()
        devices = parsing.devices_from_slices(watched.slices.snapshot()[0])
        by_name = sorted(watched.classes.snapshot()[0], key=lambda device_class: device_class.name)
        holding = [h for h in watched.outside.snapshot()[0] if h.devices]
        rules = watched.taint_rules.snapshot()[0] if watched.taint_rules else []
        sync.inventory_seen(cluster, by_name, devices, holding, sorted(rules, key=_rule_name))

    @staticmethod
    def _refreshed(cluster: Cluster) -> bool:
        """The cluster's row read again (an admin's edits); False once removed. Not at every
        pass: a pass comes with each change, and what it uses of the row, the inventory,
        this loop writes itself (_refresh_inventory)."""
        try:
            cluster.refresh_from_db()
        except Cluster.DoesNotExist:
            return False
        return True

    def _pass(self, cluster: Cluster, view: CachedView) -> bool:
        try:
            return sync.sync_from(cluster, view)
        except Exception:  # a bad pass must not end the loop: it is tried again shortly
            log.exception("following cluster %s", cluster)
            self._signal(self.changed)()
            self.stop.wait(settings.RUN_FOLLOW_INTERVAL_SECONDS)
            return True


def follow_all(stop: threading.Event, *, look_every: float = NEW_CLUSTER_SECONDS) -> None:
    """A loop for every registered cluster until stop is set; for the command. Clusters
    registered meanwhile are followed within `look_every` seconds (no restart), a removed
    one's loop ends, and each has a thread of its own: a dead cluster stalls no other."""
    running: dict[int, tuple[ClusterLoop, threading.Thread]] = {}
    while not stop.is_set():
        for cluster_id in Cluster.objects.values_list("pk", flat=True):
            if cluster_id not in running or not running[cluster_id][1].is_alive():
                loop = ClusterLoop(cluster_id, stop)
                thread = threading.Thread(
                    target=loop.run, name=f"follower-{cluster_id}", daemon=True
                )
                running[cluster_id] = loop, thread
                thread.start()
        close_old_connections()
        stop.wait(look_every)
    for loop, _ in running.values():
        loop.wake.set()  # it waits for a change (or a timer): stop now
    deadline = time.monotonic() + lease_seconds()  # for them all, not for each
    for _, thread in running.values():
        thread.join(timeout=max(deadline - time.monotonic(), 0))
    connections.close_all()
