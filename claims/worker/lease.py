"""The one lease on each cluster: whoever watches or syncs a cluster holds it, so exactly one
loop follows a cluster at a time (claims/worker/cluster_loop.py); a second copy waits, and
takes over within a lease when the holder dies. A one-off look (sync.sync_cluster) takes it
only while nobody holds it."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from claims.models import Cluster


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def lease_seconds() -> float:
    return settings.FOLLOWER_LEASE_SECONDS


def take_lease(cluster_id: int, holder: str) -> bool:
    """Take or renew the cluster's lease; False while another holder's runs."""
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


@contextmanager
def held_once(cluster_id: int) -> Iterator[bool]:
    """The lease for one look, if nobody holds it (True), let go after."""
    holder = f"once:{holder_name()}"
    held = take_lease(cluster_id, holder)
    try:
        yield held
    finally:
        if held:
            release_lease(cluster_id, holder)


def unfollowed_clusters() -> list[str]:
    """Clusters no live loop holds (Cluster.is_followed says what a live lease is)."""
    return [cluster.name for cluster in Cluster.objects.all() if not cluster.is_followed]
