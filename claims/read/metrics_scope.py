"""Which Prometheus holds a cluster's GPU metrics, and which of its series are that cluster's.

A cluster's own `prometheus_url` (or the PROMETHEUS_URL setting, the default) is asked. The
series are the cluster's by `prometheus_selector` when the admin gave one (e.g.
`cluster="lab"`, a label the scrape config or Prometheus's external labels add); without it,
when the same Prometheus serves another registered cluster too, by the node label
dcgm-exporter writes (`hostname`) matched against the GPU nodes of the cluster's inventory, so
two clusters' claims of the same namespace and name never mix. A Prometheus of one cluster's
own needs neither. docs/operations.md, "Several clusters".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from claims.kube.gpu_metrics import promql_string
from claims.models import Cluster

NODE_LABEL = "hostname"  # dcgm-exporter's node label (older releases: Hostname)


@dataclass(frozen=True)
class Scope:
    url: str  # the Prometheus to ask; "" when there is none
    matchers: str = ""  # PromQL label matchers selecting the cluster's series; "" for all

    def selector(self, *more: str) -> str:
        """Matchers for inside `{...}`: the given ones and the cluster's."""
        return ",".join(part for part in (*more, self.matchers) if part)


def prometheus_url(cluster: Any) -> str:
    return (getattr(cluster, "prometheus_url", "") or settings.PROMETHEUS_URL or "").rstrip("/")


def scope_of(cluster: Any) -> Scope:
    """The Prometheus and matchers of `cluster` (None: PROMETHEUS_URL, every series)."""
    if cluster is None:
        return Scope((settings.PROMETHEUS_URL or "").rstrip("/"))
    url = prometheus_url(cluster)
    own = (cluster.prometheus_selector or "").strip().rstrip(",").strip()
    if own:
        return Scope(url, own)
    if url and _shared(url, cluster):
        return Scope(url, f"{NODE_LABEL}=~{promql_string(_alternatives(gpu_nodes(cluster)))}")
    return Scope(url)


def gpu_nodes(cluster: Any) -> list[str]:
    devices = (cluster.inventory or {}).get("devices") or []
    return sorted({str(device["node"]) for device in devices if device.get("node")})


def _alternatives(nodes: list[str]) -> str:
    # No node known yet: a regex that matches no node name, so nothing of another cluster.
    return "|".join(re.escape(node) for node in nodes) or "$^"


def _shared(url: str, cluster: Any) -> bool:
    others = Cluster.objects.exclude(pk=cluster.pk)
    same = Q(prometheus_url__in=[url, url + "/"])
    if url == (settings.PROMETHEUS_URL or "").rstrip("/"):
        same |= Q(prometheus_url="")
    return others.filter(same).exists()
