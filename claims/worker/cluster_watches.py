"""The lists and watches one cluster's loop keeps open (cluster_loop.py): which kinds, with
which selector, parsed into what, and which of the loop's flags each change raises. Every one
must be allowed by the ClusterRole (tests/claims/worker/test_least_privilege.py starts them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from django.conf import settings

from claims.kube import parsing, pod_parsing
from claims.kube.gateway import (
    ClaimState,
    ClusterGateway,
    DeviceClassInfo,
    Holding,
    JobState,
    PodState,
    TaintRule,
)
from claims.kube.informer import Informer
from claims.kube.kueue import KueueWorkload
from claims.models import managed_selector, outside_selector
from claims.worker import kueue_steps
from claims.worker.cluster_view import CHECKED_KINDS


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


class Watches(NamedTuple):
    claims: Informer[ClaimState]
    pods: Informer[PodState]
    slices: Informer[dict[str, Any]]
    classes: Informer[DeviceClassInfo]
    checked: dict[str, Informer[dict[str, Any]]]  # CHECKED_KINDS
    outside: Informer[Holding]  # claims the portal did not make: only what they hold
    jobs: Informer[JobState]  # the workloads' Jobs: metadata and their end (pod_parsing.job_state)
    # DeviceTaintRules, where the cluster serves resource.k8s.io/v1alpha3 (else None).
    taint_rules: Informer[TaintRule] | None = None
    # Kueue's Workloads, where the cluster runs Kueue (else None): all of them, Kueue does not
    # copy the portal's labels (claims/worker/kueue_steps.py matches them by their Job).
    kueue_workloads: Informer[KueueWorkload] | None = None

    def inventory(self) -> list[Informer[Any]]:
        rules = [self.taint_rules] if self.taint_rules else []
        return [self.slices, self.classes, self.outside, *rules]

    def all(self) -> list[Informer[Any]]:
        kueue = [self.kueue_workloads] if self.kueue_workloads else []
        return [
            self.claims,
            self.pods,
            *self.inventory(),
            *self.checked.values(),
            self.jobs,
            *kueue,
        ]


class Signals(NamedTuple):
    """What a change raises: a sync pass (the portal's claims, Pods, Jobs, Kueue's
    Workloads), a drift check (namespaces, access objects, quotas), the inventory."""

    ours: Callable[[], None]
    drift: Callable[[], None]
    inventory: Callable[[], None]


def open_watches(
    gateway: ClusterGateway,
    parse_claim: Callable[[dict[str, Any]], ClaimState],
    signals: Signals,
    *,
    taint_rules: bool = False,
    kueue: bool = False,
) -> Watches:
    """Not yet started; `taint_rules`: DeviceTaintRules too (where discovery found
    resource.k8s.io/v1alpha3), `kueue`: Kueue's Workloads (where discovery found
    kueue.x-k8s.io)."""
    selector = managed_selector()
    seconds = settings.FOLLOWER_WATCH_SECONDS
    refused = settings.FOLLOWER_REFUSED_RETRY_SECONDS
    ours, drift, inventory = signals.ours, signals.drift, signals.inventory
    return Watches(
        Informer(
            gateway,
            "ResourceClaim",
            selector,
            parse_claim,
            ours,
            watch_seconds=seconds,
            refused_retry_seconds=refused,
        ),
        Informer(
            gateway,
            "Pod",
            selector,
            pod_parsing.pod_state,
            ours,
            watch_seconds=seconds,
            refused_retry_seconds=refused,
        ),
        Informer(gateway, "ResourceSlice", "", _as_is, inventory, refused_retry_seconds=refused),
        Informer(
            gateway,
            "DeviceClass",
            "",
            parsing.device_class_info,
            inventory,
            refused_retry_seconds=refused,
        ),
        {
            kind: Informer(
                gateway,
                kind,
                selector,
                parsing.metadata_only,
                drift,
                watch_seconds=seconds,
                refused_retry_seconds=refused,
            )
            for kind in CHECKED_KINDS
        },
        Informer(
            gateway,
            "ResourceClaim",
            outside_selector(),
            parsing.claim_holding,
            inventory,
            watch_seconds=seconds,
        ),
        Informer(
            gateway,
            "Job",
            selector,
            pod_parsing.job_state,
            ours,
            watch_seconds=seconds,
            refused_retry_seconds=refused,
        ),
        Informer(
            gateway,
            "DeviceTaintRule",
            "",
            parsing.taint_rule,
            inventory,
            watch_seconds=seconds,
            refused_retry_seconds=refused,
        )
        if taint_rules
        else None,
        kueue_steps.workloads_informer(gateway, ours) if kueue else None,
    )
