"""kube-controller-manager's node lifecycle controller, the part a cordon meets: a Node with
spec.unschedulable gets the taint node.kubernetes.io/unschedulable:NoSchedule, with the time it
was added, and loses it when uncordoned (doNoScheduleTaintingPass, SwapNodeControllerTaint:
the taint is appended after the Node's others, written as kube-controller-manager).

The scheduler keeps refusing a cordoned node by its NodeUnschedulable plugin, which runs before
TaintToleration and gives the reason the events show; the taint is what `kubectl describe node`
and a client reading spec.taints see.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.base.workqueue import NameQueueController
from kubesim.registry.ownership import CONTROLLER_MANAGER, record_write
from kubesim.registry.store import now_rfc3339

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def wanted_taints(node: dict[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The Node's taints after the pass, or None when they are right as they are."""
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    has = [
        t for t in taints if t.get("key") == UNSCHEDULABLE_TAINT and t.get("effect") == "NoSchedule"
    ]
    if spec.get("unschedulable") and not has:
        return [*taints, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": now}]
    if not spec.get("unschedulable") and has:
        return [t for t in taints if t not in has]
    return None


class NodeLifecycle(NameQueueController):
    thread_name = "kubesim-node-lifecycle"

    def __init__(self, store: Any, kinds: dict) -> None:
        self.nodes = kinds[("", "nodes")]
        super().__init__(store)

    def initial_names(self) -> list[str]:
        return [node["metadata"]["name"] for node in self.store.list(self.nodes, copy=False)[0]]

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural == "nodes" and event in ("ADDED", "MODIFIED"):
            self.enqueue(obj["metadata"]["name"])

    def sync(self, name: str) -> None:
        node = self.store.get(self.nodes, None, name)
        taints = wanted_taints(node, now_rfc3339())
        if taints is None:
            return
        before = copy.deepcopy(node)
        if taints:
            node.setdefault("spec", {})["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        record_write(self.nodes, before, node, CONTROLLER_MANAGER)
        self.store.update(self.nodes, node)
