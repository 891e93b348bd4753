"""Why a claim waits for its devices, or a run's Pod for a node, in plain language.

Pure: from what the claim asks for, the inventory and holds of the GPU map, and what the
cluster said about the Pod: its status (the PodScheduled condition's message, or a container's
image pull error, as the follower stores them in the run's state_message) and its latest
Warning Events (the scheduler's FailedScheduling, the kubelet's failed pulls, a DRA driver
that could not prepare the devices; the sync keeps them on the run while its Pod is pending).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from claims.read.device_matching import matching_ids
from claims.read.gpu_map import DeviceId, Hold

SCHEDULER_WORDS = re.compile(r"\d+/\d+ nodes are available")
IMAGE_WORDS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")
MISSING_CLASS = re.compile(r"device class (\S+) does not exist")
# Reasons that hold whatever else runs on the cluster (the others pass with time).
LASTING = ("unknown_class", "no_match", "too_many")
# The kubelet's reason when a DRA driver fails to prepare a claim's devices for the Pod.
PREPARE_FAILED = "FailedPrepareDynamicResources"
MAX_WARNINGS = 3  # Events of other reasons told, at most


@dataclass(frozen=True)
class Asked:
    device_class: str
    count: int | None  # None: all matching devices
    selector: str


@dataclass(frozen=True)
class Reason:
    # unknown_class, no_match, too_many, held, image, quota, unschedulable, prepare, warning
    kind: str
    text: str
    cluster_says: str = ""  # the cluster's own words, when they are what we read
    show_matching: bool = False  # a link to the matching devices on the map helps


@dataclass(frozen=True)
class Devices:
    """Matching devices per node, those of them held, and by which claims."""

    per_node: Counter[str]
    free_per_node: Counter[str]
    holders: set[int]
    held: int

    @property
    def total(self) -> int:
        return sum(self.per_node.values())


def explain(
    *,
    asked: Asked,
    inventory: dict[str, Any],
    holds: list[Hold],
    own_claim: int | None = None,
    pod_message: str = "",
    pod_warnings: Sequence[Mapping[str, Any]] = (),
) -> list[Reason]:
    """Reasons, most telling first; empty when nothing we know of stands in the way.
    pod_warnings: the Pod's Warning Events, newest first ({"reason", "message"})."""
    scheduler = next((w for w in pod_warnings if w.get("reason") == "FailedScheduling"), None)
    cluster_said = _scheduler_words(pod_message) or _scheduler_words(_said(scheduler))
    found = _from_devices(asked, inventory, holds, own_claim, cluster_said)
    found += _from_pod(pod_message or cluster_said, found)
    return found + _from_warnings(pod_warnings, found)


def _from_devices(
    asked: Asked, inv: dict[str, Any], holds: list[Hold], own_claim: int | None, said: str
) -> list[Reason]:
    classes = [dc["name"] for dc in inv.get("device_classes", [])]
    if not classes:
        return []  # no inventory yet: nothing to judge by
    if asked.device_class not in classes:
        text = _("The device class %(class)s does not exist on this cluster.") % {
            "class": asked.device_class
        }
        return [Reason("unknown_class", text, said)]
    devices = _count(inv, asked, [hold for hold in holds if hold.claim_id != own_claim])
    what = _what(asked)
    if not devices.total:
        text = _("No device on this cluster is %(what)s.") % {"what": what}
        return [Reason("no_match", text, said, True)]
    most = max(devices.per_node.values())
    if asked.count is not None and asked.count > most:
        text = _(
            "You asked for %(count)d devices on one node, but at most %(most)d %(what)s sit on "
            "one node."
        ) % {"count": asked.count, "most": most, "what": what}
        return [Reason("too_many", text, said, True)]
    if not _fits_now(asked, devices):
        text = _held_text(asked, devices, what) + _by_pods(devices, holds)
        return [Reason("held", text, said, True)]
    return []


def _by_pods(devices: Devices, holds: list[Hold]) -> str:
    """Who holds them, when the scheduler made the holders' claims for Pods that asked for an
    extended resource (`nvidia.com/gpu: 1`, the way Helm charts and notebooks ask)."""
    asked_as = Counter(
        hold.requested_as
        for hold in holds
        if hold.requested_as and hold.claim_id in devices.holders
    )
    return "".join(
        " "
        + ngettext(
            "%(n)d of these is the scheduler's claim for a Pod that asked for %(resource)s.",
            "%(n)d of these are the scheduler's claims for Pods that asked for %(resource)s.",
            n,
        )
        % {"n": n, "resource": resource}
        for resource, n in sorted(asked_as.items())
    )


def _count(inv: dict[str, Any], asked: Asked, holds: list[Hold]) -> Devices:
    matching = matching_ids(inv, asked.device_class, asked.selector)
    holder_of: dict[DeviceId, int] = {d: hold.claim_id for hold in holds for d in hold.devices}
    nodes = {
        (d["driver"], d["pool"], d["name"]): d.get("node") or d["pool"] for d in inv["devices"]
    }
    per_node: Counter[str] = Counter(nodes[d] for d in matching)
    free: Counter[str] = Counter({node: 0 for node in per_node})
    free.update(nodes[d] for d in matching if d not in holder_of)
    held_by = {holder_of[d] for d in matching if d in holder_of}
    return Devices(per_node, free, held_by, sum(1 for d in matching if d in holder_of))


def count_devices(
    inventory: dict[str, Any], asked: Asked, holds: list[Hold], own_claim: int | None
) -> Devices:
    """Matching devices per node and those free, the claim's own holds left out."""
    return _count(inventory, asked, [hold for hold in holds if hold.claim_id != own_claim])


def fits_now(asked: Asked, devices: Devices) -> bool:
    return _fits_now(asked, devices)


def _fits_now(asked: Asked, devices: Devices) -> bool:
    if asked.count is None:  # "all": every matching device on some node must be free
        return any(devices.free_per_node[n] == total for n, total in devices.per_node.items())
    return max(devices.free_per_node.values()) >= asked.count


def _what(asked: Asked) -> str:
    if asked.selector:
        return _("of class %(class)s and matching your selector") % {"class": asked.device_class}
    return _("of class %(class)s") % {"class": asked.device_class}


def _held_text(asked: Asked, devices: Devices, what: str) -> str:
    claims = len(devices.holders)
    by = ngettext("by %(n)d other claim", "by %(n)d other claims", claims) % {"n": claims}
    numbers = {"held": devices.held, "total": devices.total, "what": what, "by": by}
    if devices.held == devices.total:
        head = _("All %(total)d devices %(what)s are held %(by)s.") % numbers
    else:
        head = (
            ngettext(
                "%(held)d of the %(total)d devices %(what)s is held %(by)s.",
                "%(held)d of the %(total)d devices %(what)s are held %(by)s.",
                devices.held,
            )
            % numbers
        )
    free = max(devices.free_per_node.values())
    wanted = _("all of them free on one node") if asked.count is None else f"{asked.count}"
    need = ngettext(
        "At most %(free)d is free on one node; you need %(wanted)s.",
        "At most %(free)d are free on one node; you need %(wanted)s.",
        free,
    ) % {"free": free, "wanted": wanted}
    tail = _("The claim gets its devices once enough of them are released.")
    return f"{head} {need} {tail}"


def from_refusal(message: str) -> list[Reason]:
    """Why the cluster refused to create the claim (it never waited for devices)."""
    return _from_pod(message, []) if "exceeded quota" in message else []


def _scheduler_words(message: str) -> str:
    return message if SCHEDULER_WORDS.search(message) else ""


def _from_pod(message: str, found: list[Reason]) -> list[Reason]:
    """What the Pod's status says that the devices do not already explain."""
    if not message:
        return []
    refused = _image_or_quota(message)
    if refused:
        return [refused]
    if found or not SCHEDULER_WORDS.search(message):
        return []
    missing = MISSING_CLASS.search(message)
    if missing:
        text = _("The device class %(class)s does not exist on this cluster.") % {
            "class": missing.group(1)
        }
        return [Reason("unknown_class", text, message)]
    return [Reason("unschedulable", _unschedulable_text(message), message)]


def _image_or_quota(message: str, image_words: tuple[str, ...] = IMAGE_WORDS) -> Reason | None:
    """An image that cannot be pulled or a ResourceQuota, as the Pod's status or an Event says."""
    if any(word in message for word in image_words):
        text = _("The container image could not be pulled, so the Pod cannot start.")
        return Reason("image", text, message)
    if "exceeded quota" in message:
        text = _("The namespace's ResourceQuota does not allow this; ask an admin to raise it.")
        return Reason("quota", text, message)
    return None


def _unschedulable_text(message: str) -> str:
    if "cannot allocate all claims" in message:
        return _(
            "No node has enough free matching devices right now. Devices held by claims "
            "made outside the portal do not show on the map."
        )
    return _("Kubernetes found no node for the Pod for a reason other than its devices.")


def _said(warning: Mapping[str, Any] | None) -> str:
    return str(warning.get("message") or "") if warning else ""


def _from_warnings(warnings: Sequence[Mapping[str, Any]], found: list[Reason]) -> list[Reason]:
    """What the Pod's Events say that its status and the devices do not already explain."""
    told = {reason.kind for reason in found}
    extra: list[Reason] = []
    # The kubelet's "Error: ErrImagePull" follows the event that says why: that one first.
    for warning in sorted(warnings, key=lambda w: _said(w).startswith("Error: ")):
        event_reason = str(warning.get("reason") or "")
        reason = _from_warning(event_reason, _said(warning))
        if reason is None or len(extra) == MAX_WARNINGS:
            continue
        key = event_reason if reason.kind == "warning" else reason.kind
        if key not in told:
            told.add(key)
            extra.append(reason)
    return extra


def _from_warning(reason: str, message: str) -> Reason | None:
    if reason == "FailedScheduling" or not message:
        return None  # read with the Pod's status above
    # The kubelet's events also say "Failed to pull image ...".
    refused = _image_or_quota(message, (*IMAGE_WORDS, "pull image"))
    if refused:
        return refused
    if reason == PREPARE_FAILED:
        text = _(
            "The node could not prepare the claim's devices for the Pod: the GPU's DRA driver "
            "refused. Ask an admin to look at the driver on that node."
        )
        return Reason("prepare", text, message)
    text = _("Kubernetes reported a problem with the Pod (%(reason)s).") % {"reason": reason}
    return Reason("warning", text, f"{reason}: {message}")
