"""Follow each cluster by watching it, not by polling: claims/kube/informer.py keeps a cache
of the portal's ResourceClaims and Pods current, and every change runs one sync pass over those
caches through the same code (and observations) as the periodic sync.

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

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from claims import sync
from claims.cluster_ops import gateway_for
from claims.kube import parsing
from claims.kube.gateway import ClaimState, PodState
from claims.kube.informer import Informer
from claims.models import Cluster, managed_selector

log = logging.getLogger(__name__)


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

    def __init__(self, claims: Informer[ClaimState], pods: Informer[PodState]) -> None:
        self._claims, self._pods = claims, pods

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


class ClusterFollower:
    """Follows one cluster while it holds the lease; waits for the lease otherwise."""

    def __init__(self, cluster_id: int, stop: threading.Event, holder: str = "") -> None:
        self.cluster_id = cluster_id
        self.stop = stop
        self.holder = holder or holder_name()
        self.changed = threading.Event()
        self.passes = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if take_lease(self.cluster_id, self.holder):
                    log.info("following cluster %s as %s", self.cluster_id, self.holder)
                    self._follow()
                else:
                    self.stop.wait(lease_seconds() / 3)
        finally:
            release_lease(self.cluster_id, self.holder)
            close_old_connections()

    def _follow(self) -> None:
        cluster = Cluster.objects.get(pk=self.cluster_id)
        gateway = gateway_for(cluster)
        selector = managed_selector()
        watch_seconds = settings.FOLLOWER_WATCH_SECONDS
        claims = Informer(
            gateway,
            "ResourceClaim",
            selector,
            parsing.claim_state,
            self.changed.set,
            watch_seconds=watch_seconds,
        )
        pods = Informer(
            gateway,
            "Pod",
            selector,
            parsing.pod_state,
            self.changed.set,
            watch_seconds=watch_seconds,
        )
        lists = CachedLists(claims, pods)
        claims.start()
        pods.start()
        try:
            self._sync_on_change(cluster, lists)
        finally:
            claims.stop()
            pods.stop()

    def _sync_on_change(self, cluster: Cluster, lists: CachedLists) -> None:
        """One pass per burst of changes; while runs are under way, also every
        RUN_FOLLOW_INTERVAL_SECONDS (their logs grow without their Pod changing)."""
        renew_every = lease_seconds() / 3
        renew_at = time.monotonic() + renew_every
        runs_under_way = True  # until the first pass says otherwise
        while not self.stop.is_set():
            wait = settings.RUN_FOLLOW_INTERVAL_SECONDS if runs_under_way else renew_every
            self.changed.wait(min(wait, max(renew_at - time.monotonic(), 0)))
            if time.monotonic() >= renew_at:
                if not take_lease(self.cluster_id, self.holder):
                    log.warning("lost the lease of cluster %s", self.cluster_id)
                    return
                renew_at = time.monotonic() + renew_every
            if not lists.ready() or not (self.changed.is_set() or runs_under_way):
                continue
            self.changed.clear()
            cluster.refresh_from_db()
            try:
                outcome = sync.sync_from(cluster, lists)
            except Exception:  # a bad pass must not end the follower; the next change retries
                log.exception("following cluster %s", cluster)
                outcome = True
            if outcome is None:  # the periodic sync holds the cluster: try again shortly
                self.changed.set()
                self.stop.wait(settings.RUN_FOLLOW_INTERVAL_SECONDS)
            else:
                runs_under_way = outcome
                self.passes += 1


def follow_all(stop: threading.Event) -> None:
    """Follow every registered cluster (new ones too) until stop is set; for the command."""
    threads: dict[int, threading.Thread] = {}
    while not stop.is_set():
        for cluster_id in Cluster.objects.values_list("pk", flat=True):
            if cluster_id not in threads or not threads[cluster_id].is_alive():
                follower = ClusterFollower(cluster_id, stop)
                threads[cluster_id] = threading.Thread(
                    target=follower.run, name=f"follower-{cluster_id}", daemon=True
                )
                threads[cluster_id].start()
        close_old_connections()
        stop.wait(lease_seconds())
    for thread in threads.values():
        thread.join(timeout=lease_seconds())
