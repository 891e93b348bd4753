"""Register (or update) the default cluster from the settings and read its inventory.

The deployment's settings are the truth for this one cluster: a kubeconfig an admin uploaded
for a cluster of the same name on the Clusters page is replaced by them."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from claims.kube.gateway import KubeError
from claims.models import Cluster
from claims.worker import sync


def ensure_cluster(
    *, name: str, kubeconfig_path: str, context: str, in_cluster: bool, simulated: bool
) -> Cluster:
    cluster, _ = Cluster.objects.update_or_create(
        name=name,
        defaults={
            "kubeconfig_path": kubeconfig_path,
            "kubeconfig_encrypted": "",
            "context": context,
            "in_cluster": in_cluster,
            "simulated": simulated,
        },
    )
    return cluster


def refresh_until_reachable(cluster: Cluster, wait_seconds: float) -> None:
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            sync.refresh_inventory(cluster)
            return
        except KubeError as error:
            if time.monotonic() > deadline:
                raise CommandError(f"cannot read {cluster}: {error}") from None
            time.sleep(0.5)


class Command(BaseCommand):
    help = "Register the default cluster (KUBECONFIG, in-cluster, or kubesim) and sync it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", default=settings.CLUSTER_NAME)
        parser.add_argument("--kubeconfig", default=settings.KUBECONFIG)
        parser.add_argument("--context", default=settings.KUBE_CONTEXT)
        parser.add_argument("--in-cluster", action="store_true", default=settings.KUBE_IN_CLUSTER)
        parser.add_argument("--simulated", action="store_true", default=settings.SIMULATED_CLUSTER)
        parser.add_argument("--wait", type=float, default=30, help="seconds to wait for it")

    def handle(self, *args: Any, **options: Any) -> None:
        kubeconfig = options["kubeconfig"]
        if not kubeconfig and not options["in_cluster"]:
            kubeconfig = settings.KUBESIM_KUBECONFIG
        cluster = ensure_cluster(
            name=options["name"],
            kubeconfig_path=kubeconfig,
            context=options["context"],
            in_cluster=options["in_cluster"],
            simulated=options["simulated"],
        )
        refresh_until_reachable(cluster, options["wait"])
        cluster.refresh_from_db()
        versions = ", ".join(cluster.resource_versions) or "none"
        counts = cluster.inventory.get("device_counts", {})
        self.stdout.write(
            f"cluster {cluster.name}: Kubernetes {cluster.server_version}, "
            f"resource.k8s.io {versions} (using {cluster.preferred_resource_version}), "
            f"devices {counts}"
        )
