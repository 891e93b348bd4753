"""Watch every registered cluster and write what changes to the database (claims/follower.py).

Run one or more copies: each cluster is followed by exactly one of them at a time (a lease in
the database); the others wait and take over when it dies. SIGTERM or Ctrl-C stops it.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from claims import follower
from portal import metrics


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
            unfollowed = follower.unfollowed_clusters()
            if unfollowed:
                raise CommandError(f"no live follower for: {', '.join(unfollowed)}")
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        metrics.serve_for_process()  # watch restarts and API calls, on METRICS_PORT
        self.stdout.write(f"Following clusters as {follower.holder_name()}.")
        follower.follow_all(stop)
