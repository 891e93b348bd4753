"""One loop per registered cluster: watch it and keep the database and the pages current with
it, and heal drift (claims/worker/cluster_loop.py).

Run one or more copies: each cluster is followed by exactly one of them at a time (its lease in
the database); the others wait and take over when it dies. SIGTERM or Ctrl-C stops it.
"""

from __future__ import annotations

import gc
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import import_string

from claims.worker import cluster_loop, lease


class Command(BaseCommand):
    help = "Follow every cluster with watches (one active follower per cluster)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit 1 unless every cluster has a live follower (a health check)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            unfollowed = lease.unfollowed_clusters()
            if unfollowed:
                raise CommandError(f"no live follower for: {', '.join(unfollowed)}")
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        # Watch restarts and API calls, on METRICS_PORT (the project's metrics server).
        import_string(settings.PROCESS_METRICS_SERVER)()
        self.stdout.write(f"Following clusters as {lease.holder_name()}.")
        # What start loaded is set aside from the collector, as portal/startup_heap.py says
        # for the web and the worker (claims does not import portal).
        gc.collect()
        gc.freeze()
        cluster_loop.follow_all(stop)
