"""kube-scheduler's DRA part and the resourceclaim controller, as one thread over the Store.

Store events are queued by the subscriber callback (the writer never waits) and handled in
the scheduler's own thread: pods waiting for a node are tried, claims are allocated and
reserved, pods bound; finished or deleted pods leave `reservedFor`, and a claim without
consumers is deallocated. Its filters, the inventory they read and the messages they give
are scheduler_filters.py.
"""

import logging
import queue
import threading
from typing import Any

from kubesim.base.errors import ApiError
from kubesim.controllers import extended_resources
from kubesim.controllers.allocator import ClassMissing, DeviceId, SelectorFailed
from kubesim.controllers.node_affinity import pod_fits_node
from kubesim.controllers.scheduler_filters import (
    CANNOT_ALLOCATE,
    CORDONED,
    NO_CLAIMS_TO_DEALLOCATE,
    SELECTOR_MISMATCH,
    STILL_NOT_SCHEDULABLE,
    UNTOLERATED,
    Inventory,
    SchedulerError,
    Unschedulable,
    allocated_devices,
    device_ids,
    fit_error,
    fit_on_node,
    has_untolerated_taint,
    read_inventory,
    tolerates_cordon,
)
from kubesim.registry.kinds import kind_for
from kubesim.registry.reservations import (
    ClaimNotReady,
    bind,
    claims_for_pod,
    create_extended_claim,
    delete_generated_claims,
    mark_unschedulable,
    object_key,
    pod_claims,
    record_extended_claim,
    release_claim,
    reserve,
    unreserve,
)

log = logging.getLogger(__name__)

PODS, CLAIMS = kind_for("", "pods"), kind_for("resource.k8s.io", "resourceclaims")
TERMINAL = ("Succeeded", "Failed")


class Scheduler:
    def __init__(
        self, store: Any, topology: Any = None, *, allocation_timestamp: bool = True
    ) -> None:
        self.store = store
        self.topology = topology
        self.allocation_timestamp = allocation_timestamp
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._in_use: dict[tuple[str, str], set[DeviceId]] = {}
        # Pods waiting for a node, tried oldest first as the scheduler's queue does.
        self._waiting: dict[tuple[str, str], str] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubesim-scheduler", daemon=True)
        store.subscribe(self._on_event)

    def start(self) -> "Scheduler":
        self._events.put(("RESYNC", "", {}))
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._events.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _on_event(self, event: str, ref: Any, obj: dict) -> None:
        # A Node changing (cordoned, tainted, relabelled) moves waiting Pods back to the
        # active queue at once, as upstream's NodeUpdate event hints do.
        if ref.plural in ("pods", "resourceclaims", "resourceslices", "deviceclasses", "nodes"):
            self._events.put((event, ref.plural, obj))

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                batch = [self._events.get(timeout=2.0)]
            except queue.Empty:
                batch = [("RETRY", "", {})]  # a periodic retry, like the scheduler's backoff queue
            while not self._events.empty():
                batch.append(self._events.get())
            try:
                self._handle_batch([item for item in batch if item is not None])
            except Exception:
                log.exception("scheduler pass failed; retrying on the next event")

    def _handle_batch(self, batch: list[tuple[str, str, dict]]) -> None:
        retry = False
        for event, plural, obj in batch:
            retry |= self._handle(event, plural, obj)
        if not retry:
            return
        self._waiting.update(self._unscheduled_pods())
        if not self._waiting:
            return
        inventory = read_inventory(self.store)
        for key in sorted(self._waiting, key=lambda k: (self._waiting[k], k)):
            self._try_schedule(key, inventory)

    def _handle(self, event: str, plural: str, obj: dict) -> bool:
        """Record one event; True if waiting pods deserve another try."""
        if event == "RESYNC":
            self._resync()
            return True
        if plural == "pods":
            return self._pod_changed(event, obj)
        if plural == "resourceclaims":
            self._claim_changed(event, obj)
        return True

    def _resync(self) -> None:
        claims, _ = self.store.list(CLAIMS)
        self._in_use = {object_key(claim): allocated_devices(claim) for claim in claims}
        pods, _ = self.store.list(PODS, copy=False)
        live = _live_uids(pods)
        for claim in claims:
            release_claim(self.store, claim, live)
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in TERMINAL:
                self._release(pod)

    def _live_pod_uids(self) -> set[str]:
        return _live_uids(self.store.list(PODS, copy=False)[0])

    def _pod_changed(self, event: str, pod: dict) -> bool:
        key = object_key(pod)
        phase = (pod.get("status") or {}).get("phase")
        if event == "DELETED" or phase in TERMINAL:
            self._waiting.pop(key, None)
            return self._release(pod)
        if (pod.get("spec") or {}).get("nodeName"):
            return False  # a running pod's status changes free nothing
        self._waiting[key] = pod["metadata"].get("creationTimestamp", "")
        return True

    def _claim_changed(self, event: str, claim: dict) -> None:
        if event == "DELETED":
            self._in_use.pop(object_key(claim), None)
            return
        self._in_use[object_key(claim)] = allocated_devices(claim)
        if claim["metadata"].get("deletionTimestamp"):
            release_claim(self.store, claim, self._live_pod_uids())

    def _release(self, pod: dict) -> bool:
        """Take a finished or deleted pod out of its claims; True if devices were freed."""
        freed = False
        for claim in pod_claims(self.store, pod):
            released = unreserve(self.store, claim, pod)
            if released is not None and not allocated_devices(released):
                self._in_use[object_key(released)] = set()
                freed = True
        delete_generated_claims(self.store, pod)
        return freed

    def _unscheduled_pods(self) -> dict[tuple[str, str], str]:
        pods, _ = self.store.list(PODS, copy=False)
        return {
            object_key(pod): pod["metadata"].get("creationTimestamp", "")
            for pod in pods
            if not (pod.get("spec") or {}).get("nodeName")
            and (pod.get("status") or {}).get("phase") not in TERMINAL
            and not pod["metadata"].get("deletionTimestamp")
        }

    def _try_schedule(self, key: tuple[str, str], inventory: Inventory) -> None:
        try:
            self._schedule(key, inventory)
        except ApiError as error:  # a conflict or a vanished object: the next pass retries
            log.info("retrying %s/%s later: %s", *key, error)

    def _schedule(self, key: tuple[str, str], inventory: Inventory) -> None:
        try:
            pod = self.store.get(PODS, *key)
        except ApiError:
            self._waiting.pop(key, None)
            return
        if (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            self._waiting.pop(key, None)
            return
        try:
            claims = claims_for_pod(self.store, pod)
        except ClaimNotReady:
            return  # PreEnqueue: the pod is not tried until its claims exist
        pod = self.store.get(PODS, *key)  # template claims may have been recorded on it
        try:
            node, allocations = self._choose_node(pod, claims, inventory)
        except Unschedulable as reason:
            mark_unschedulable(self.store, pod, str(reason))
            return
        except SchedulerError as error:
            mark_unschedulable(self.store, pod, str(error), reason="SchedulerError")
            return
        self._commit(pod, node, claims, allocations)

    def _choose_node(
        self, pod: dict, claims: list[dict], inventory: Inventory
    ) -> tuple[str, dict[tuple[str, str], list[dict]]]:
        nodes = inventory.nodes
        mapping = extended_resources.class_mapping(inventory.classes)
        wants_dra = any(name in mapping for name in extended_resources.pod_extended_requests(pod))
        postfilter = STILL_NOT_SCHEDULABLE if claims or wants_dra else NO_CLAIMS_TO_DEALLOCATE
        for claim in claims:
            if claim["metadata"].get("deletionTimestamp"):
                deleting = f'resourceclaim "{claim["metadata"]["name"]}" is being deleted'
                raise Unschedulable(fit_error(len(nodes), prefilter=deleting))
        in_use = set().union(*self._in_use.values())
        reasons: dict[str, int] = {}
        for node in nodes:
            if node in inventory.cordoned and not tolerates_cordon(pod):
                reasons[CORDONED] = reasons.get(CORDONED, 0) + 1
                continue
            if has_untolerated_taint(pod, inventory.taints.get(node, [])):
                reasons[UNTOLERATED] = reasons.get(UNTOLERATED, 0) + 1
                continue
            if not pod_fits_node(pod, node, inventory.labels.get(node, {})):
                reasons[SELECTOR_MISMATCH] = reasons.get(SELECTOR_MISMATCH, 0) + 1
                continue
            through_dra, missing = extended_resources.node_needs(
                pod, inventory.allocatable.get(node, {}), mapping
            )
            if missing:  # NodeResourcesFit, before the DRA plugin
                for name in missing:
                    reason = f"Insufficient {name}"
                    reasons[reason] = reasons.get(reason, 0) + 1
                continue
            devices = inventory.devices[node]
            try:
                allocations = fit_on_node(node, claims, devices, inventory.classes, in_use)
                if through_dra:
                    taken = set(in_use).union(*map(device_ids, allocations.values()))
                    special = extended_resources.fit(
                        pod, through_dra, mapping, devices, inventory.classes, taken
                    )
                    if special is None:
                        raise Unschedulable(CANNOT_ALLOCATE)
                    allocations[EXTENDED] = special
                return node, allocations
            except Unschedulable as reason:
                reasons[str(reason)] = reasons.get(str(reason), 0) + 1
            except ClassMissing as missing:
                raise Unschedulable(fit_error(len(nodes), prefilter=str(missing))) from None
            except SelectorFailed as failed:  # framework.RunFilterPlugins' words for an error
                raise SchedulerError(
                    f'running "DynamicResources" filter plugin: {failed}'
                ) from None
        raise Unschedulable(fit_error(len(nodes), reasons, postfilter=postfilter))

    def _commit(self, pod: dict, node: str, claims: list[dict], allocations: dict) -> None:
        try:
            for claim in claims:
                results = allocations.get(object_key(claim))
                stored = reserve(self.store, claim, pod, node, results, self.allocation_timestamp)
                self._in_use[object_key(stored)] = allocated_devices(stored)
            if EXTENDED in allocations:
                pod = self._commit_extended(pod, node, *allocations[EXTENDED])
            bind(self.store, pod, node)
        except ApiError as error:
            log.info("binding %s/%s failed, retrying: %s", *object_key(pod), error)
            return
        self._waiting.pop(object_key(pod), None)

    def _commit_extended(self, pod: dict, node: str, claim: dict, results: list[dict]) -> dict:
        """PreBind for the special claim: create it, allocate and reserve it for the pod, then
        record it in the pod's status."""
        created = create_extended_claim(self.store, claim)
        stored = reserve(self.store, created, pod, node, results, self.allocation_timestamp)
        self._in_use[object_key(stored)] = allocated_devices(stored)
        mappings = extended_resources.request_mappings(stored, pod)
        return record_extended_claim(self.store, pod, stored["metadata"]["name"], mappings)


# The allocations' key of the claim the scheduler makes for extended resources.
EXTENDED = ("", "")


def _live_uids(pods: list[dict]) -> set[str]:
    return {
        p["metadata"]["uid"] for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL
    }
