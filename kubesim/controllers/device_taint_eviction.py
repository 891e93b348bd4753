"""kube-controller-manager's device taint eviction controller (pkg/controller/devicetainteviction,
v1.34, run with the DRADeviceTaints feature, which kubesim takes as on): a Pod that uses an
allocated ResourceClaim one of whose devices has a NoExecute taint (in its ResourceSlice, or
added by a DeviceTaintRule) is deleted, unless the taint is tolerated.

As upstream:
- Only a scheduled Pod (spec.nodeName) is evicted, and only through the claims its
  spec.resourceClaims name (a claim of its own from a template, through
  status.resourceClaimStatuses, when the claim is reserved for it). The scheduler's claim for
  an extended resource is not among them in 1.34, so such a Pod is not evicted.
- The tolerations are those the allocation result copied from the request; only one whose
  effect is NoExecute counts (claimEvictionTime). Tolerated without tolerationSeconds: the
  taint is ignored; with them, the Pod goes that long after the taint's timeAdded (the
  shortest of them), else at its timeAdded. Seconds are divided by `speed`.
- When due, the Pod gets the condition DisruptionTarget (DeletionByDeviceTaintManager, "Device
  Taint manager: deleting due to NoExecute taint"), a Normal Event DeviceTaintManagerEviction
  "Marking for deletion Pod <ns>/<name>" from device-taint-eviction-controller, and is deleted
  gracefully. Its DRA claim is freed as for any deleted Pod.
Not modelled: DeviceTaintRule status (newer than 1.34), the cancel Event, pool generations.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim.base import errors
from kubesim.controllers.allocator import tolerates, with_taint_rules
from kubesim.controllers.scheduler import CLAIMS, PODS
from kubesim.controllers.scheduler_filters import CLASSES, SLICES, TAINT_RULES
from kubesim.registry import graceful
from kubesim.registry.reservations import record_event
from kubesim.registry.store import now_rfc3339

NAME = "device-taint-eviction-controller"
CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByDeviceTaintManager",
    "message": "Device Taint manager: deleting due to NoExecute taint",
}
WATCHED = ("pods", "resourceclaims", "resourceslices", "devicetaintrules")
DeviceId = tuple[str, str, str]


def _time(stamp: str | None) -> datetime:
    if not stamp:
        return datetime.now(UTC)
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def no_execute_taints(slices: list[dict]) -> dict[DeviceId, list[dict]]:
    """Every device's NoExecute taints (the slices with the rules' taints added)."""
    found: dict[DeviceId, list[dict]] = {}
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            taints = [t for t in device.get("taints") or [] if t.get("effect") == "NoExecute"]
            if taints:
                found[(spec.get("driver", ""), pool, device["name"])] = taints
        # kubesim publishes one slice per pool: no older generation to skip.
    return found


def claim_eviction_time(
    claim: dict, taints: dict[DeviceId, list[dict]], speed: float = 1.0
) -> datetime | None:
    """claimEvictionTime: the earliest moment a device's untolerated NoExecute taint evicts
    the claim's Pods, None when none does."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    when: datetime | None = None
    for result in (allocation.get("devices") or {}).get("results") or []:
        device = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
        for taint in taints.get(device, []):
            at = _time(taint.get("timeAdded"))
            seconds: int | None = None
            forever = False
            for toleration in result.get("tolerations") or []:
                if toleration.get("effect") != "NoExecute" or not tolerates(toleration, taint):
                    continue
                if toleration.get("tolerationSeconds") is None:
                    forever = True
                    break
                given = max(int(toleration["tolerationSeconds"]), 0)
                seconds = given if seconds is None else min(seconds, given)
            if forever:
                continue
            if seconds is not None:
                at += timedelta(seconds=seconds / speed)
            when = at if when is None or at < when else when
    return when


def _claim_names(pod: dict) -> list[str]:
    """resourceclaim.Name for each of the Pod's claims: its own name, or the one made from
    its template (status.resourceClaimStatuses); a claim not made yet is skipped."""
    made = {
        status.get("name"): status.get("resourceClaimName")
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or made.get(entry.get("name"))
        if name:
            names.append(name)
    return names


def pod_eviction_time(
    pod: dict, claims: dict[tuple[str, str], dict], taints: dict, speed: float = 1.0
) -> datetime | None:
    """podEvictionTime: the earliest eviction time of the claims reserved for the Pod."""
    meta = pod["metadata"]
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    when: datetime | None = None
    for name in _claim_names(pod):
        claim = claims.get((meta["namespace"], name))
        status = (claim or {}).get("status") or {}
        if not claim or not status.get("allocation"):
            continue
        reserved = {r.get("uid") for r in status.get("reservedFor") or []}
        if meta.get("uid") not in reserved:
            continue
        at = claim_eviction_time(claim, taints, speed)
        if at is not None and (when is None or at < when):
            when = at
    return when


class DeviceTaintEviction:
    def __init__(self, store: Any, speed: float = 1.0) -> None:
        self.store = store
        self.speed = max(float(speed or 1.0), 0.001)
        self._evicted: set[str] = set()  # Pod uids
        self._wake = threading.Condition()
        self._changed = True
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="kubesim-device-taint", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> DeviceTaintEviction:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=2)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        if ref.plural in WATCHED:
            with self._wake:
                self._changed = True
                self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                self._changed = False
            next_due = None
            with contextlib.suppress(errors.ApiError):
                next_due = self._pass()
            with self._wake:
                while not self._stopping and not self._changed:
                    timeout = None if next_due is None else next_due - time.time()
                    if timeout is not None and timeout <= 0:
                        break
                    self._wake.wait(timeout)
                if self._stopping:
                    return

    def _pass(self) -> float | None:
        """Evict the Pods that are due; the wall time of the next one, if any."""
        classes = {c["metadata"]["name"]: c for c in self.store.list(CLASSES, copy=False)[0]}
        rules = self.store.list(TAINT_RULES, copy=False)[0]
        taints = no_execute_taints(
            with_taint_rules(self.store.list(SLICES, copy=False)[0], rules, classes)
        )
        if not taints:
            return None
        claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in self.store.list(CLAIMS, copy=False)[0]
        }
        now = datetime.now(UTC)
        next_due = None
        for pod in self.store.list(PODS, copy=False)[0]:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") or meta.get("uid") in self._evicted:
                continue
            when = pod_eviction_time(pod, claims, taints, self.speed)
            if when is None:
                continue
            if when <= now:
                self._evict(meta["namespace"], meta["name"], meta["uid"])
            else:
                due = when.timestamp()
                next_due = due if next_due is None else min(next_due, due)
        return next_due

    def _evict(self, namespace: str, name: str, uid: str) -> None:
        """deletePodHandler and addConditionAndDeletePod."""
        try:
            pod = self.store.get(PODS, namespace, name)
        except errors.ApiError:
            return
        if pod["metadata"].get("uid") != uid:
            return
        self._evicted.add(uid)
        record_event(
            self.store,
            pod,
            "Normal",
            "DeviceTaintManagerEviction",
            f"Marking for deletion Pod {namespace}/{name}",
            component=NAME,
        )
        status = pod.setdefault("status", {})
        conditions = status.get("conditions") or []
        others = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        before = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
        if before is None or any(before.get(k) != v for k, v in CONDITION.items()):
            # UpdatePodCondition: a changed condition gets a new transition time.
            stamp = {"lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
            status["conditions"] = [*others, copy.deepcopy(CONDITION) | stamp]
            with contextlib.suppress(errors.ApiError):
                pod = self.store.update(PODS, pod)
        with contextlib.suppress(errors.ApiError):
            self.store.delete(PODS, namespace, name, grace=graceful.pod_grace_seconds(pod, {}))
