"""Re-encrypt every stored kubeconfig with the newest key of CLUSTER_CREDENTIALS_KEYS.

Rotating a key: put the new key first in CLUSTER_CREDENTIALS_KEYS (keep the old one after it),
deploy, run this command, then remove the old key.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from claims.clusters import credentials


class Command(BaseCommand):
    help = "Re-encrypt the stored kubeconfigs with the newest CLUSTER_CREDENTIALS_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        done = credentials.reencrypt_all()
        self.stdout.write(f"Re-encrypted {done} kubeconfig(s) with the newest key.")
