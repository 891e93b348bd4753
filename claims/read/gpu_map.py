"""The GPU map of a cluster: its nodes, the cards on each, and who holds which device.

A pure function of what the portal stored (Cluster.inventory from the ResourceSlices and what
claims made outside the portal hold, and the allocations of the claims it follows), so the
page is drawn without asking the cluster. A GPU cut into MIG devices is one card with its
partitions; a whole GPU is one device. A device held outside the portal is "held outside the
portal"; whose it is (namespace and claim, or the Pod that asked for `nvidia.com/gpu`) only an
admin sees. A device tainted NoSchedule or NoExecute is "tainted", not free, with its taint
(key=value:effect) and since when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from claims.kube.parsing import POD_HOLDING
from claims.read import inventory

DeviceId = tuple[str, str, str]  # driver, pool, device
MIG_SEPARATOR = "-mig-"
# What a tile of the map shows, with the mark that says it without colour (the legend's order).
FREE, MINE, TEAM, OTHER, OUTSIDE = "free", "mine", "team", "other", "outside"
TAINTED = "tainted"
LEGEND = (
    (FREE, "○", pgettext_lazy("device", "free")),
    (MINE, "●", gettext_lazy("held by you")),
    (TEAM, "◐", gettext_lazy("held by your team")),
    (OTHER, "■", gettext_lazy("held by others")),
    (OUTSIDE, "▣", gettext_lazy("held outside the portal")),
    (TAINTED, "⊘", gettext_lazy("tainted, not free")),
)
MARKS = {status: (mark, label) for status, mark, label in LEGEND}


@dataclass(frozen=True)
class Hold:
    """A claim and the devices it has allocated: one the portal follows, or (whose OUTSIDE)
    one made outside it, whose claim_id is negative and stands for no row."""

    claim_id: int
    claim_name: str
    namespace: str
    owner: str
    devices: frozenset[DeviceId]
    shown: bool = False  # the viewer may see whose claim it is (an approver, or its owner)
    whose: str = OTHER  # MINE, TEAM, OTHER or OUTSIDE, as the viewer sees it (see `whose`)
    # OUTSIDE only: the extended resource a Pod asked for (then namespace and claim_name are
    # the Pod's), "" for a claim.
    requested_as: str = ""

    @property
    def outside(self) -> bool:
        return self.whose == OUTSIDE

    @property
    def label(self) -> str:
        """Whose claim, for a viewer it is shown to: owner/claim, or namespace/claim."""
        return f"{self.namespace if self.outside else self.owner}/{self.claim_name}"

    @property
    def detail(self) -> str:
        """Who holds a device held outside the portal, in the words the viewer may see."""
        if not self.outside:
            return ""
        if self.requested_as and self.shown:
            return gettext("requested as %(resource)s by Pod %(pod)s") % {
                "resource": self.requested_as,
                "pod": self.label,
            }
        if self.requested_as:
            return gettext("requested as %(resource)s by a Pod") % {"resource": self.requested_as}
        return gettext("claim %(claim)s") % {"claim": self.label} if self.shown else ""


@dataclass(frozen=True)
class DeviceCell:
    driver: str
    pool: str
    name: str
    kind: str  # "gpu" or "mig"
    model: str
    memory: str
    profile: str
    holder: Hold | None
    highlighted: bool
    matching: bool
    taints: tuple[dict[str, str], ...] = ()  # NoSchedule or NoExecute ones
    activity: float | None = None  # 0-1 now, from dcgm-exporter (claims.read.utilisation)

    @property
    def use(self) -> str:
        """A held device's use now for its colour: idle, low, busy; "" without metrics."""
        if not self.holder or self.activity is None:
            return ""
        if self.activity <= settings.UTILISATION_IDLE_THRESHOLD:
            return "idle"
        return "low" if self.activity < 0.5 else "busy"

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.name)

    @property
    def free(self) -> bool:
        return not self.holder and not self.taints

    @property
    def state(self) -> str:
        if self.holder:
            return "held"
        return TAINTED if self.taints else "free"

    @property
    def status(self) -> str:
        """The tile's state: whose claim holds it, tainted, or free."""
        if self.holder:
            return self.holder.whose
        return TAINTED if self.taints else FREE

    @property
    def taint_words(self) -> str:
        """Each taint as key=value:effect and since when (its timeAdded)."""
        words = []
        for taint in self.taints:
            said = f"{taint['key']}={taint.get('value', '')}:{taint['effect']}"
            if taint.get("timeAdded"):
                said = gettext("%(taint)s since %(since)s") % {
                    "taint": said,
                    "since": taint["timeAdded"],
                }
            words.append(said)
        return ", ".join(words)

    @property
    def mark(self) -> str:
        return MARKS[self.status][0]

    @property
    def status_label(self) -> str:
        return str(MARKS[self.status][1])

    @property
    def description(self) -> str:
        """The tile's text label: the device, its model and memory, and its state."""
        parts = [f"{self.name}: {' '.join(filter(None, [self.model, self.profile]))}"]
        parts += [self.memory, self.status_label]
        if self.holder and self.holder.outside:
            parts.append(self.holder.detail)
        elif self.holder and self.holder.shown:
            parts.append(gettext("claim %(claim)s") % {"claim": self.holder.label})
        if self.use:
            words = {
                "idle": gettext("idle"),
                "low": gettext("little used"),
                "busy": gettext("busy"),
            }
            parts.append(
                gettext("activity %(activity).2f (%(use)s)")
                % {"activity": self.activity, "use": words[self.use]}
            )
        if self.taints:
            parts.append(gettext("taint %(taints)s") % {"taints": self.taint_words})
        return ", ".join(part for part in parts if part)

    @property
    def slices(self) -> int:
        """A MIG device's memory slices (…-<start>-<size>), which its tile's width follows."""
        size = self.name.rpartition("-")[2]
        return min(int(size), 8) if self.kind == "mig" and size.isdigit() else 1


@dataclass(frozen=True)
class Card:
    """One physical GPU: a single device, or the MIG devices it is cut into."""

    label: str
    model: str
    memory: str
    devices: list[DeviceCell]

    @property
    def is_mig(self) -> bool:
        return any(cell.kind == "mig" for cell in self.devices)


@dataclass(frozen=True)
class NodeMap:
    name: str
    cards: list[Card]

    @property
    def devices(self) -> list[DeviceCell]:
        return [cell for card in self.cards for cell in card.devices]

    @property
    def free(self) -> int:
        return sum(1 for cell in self.devices if cell.free)

    @property
    def highlighted(self) -> bool:
        return any(cell.highlighted for cell in self.devices)


@dataclass(frozen=True)
class ModelCount:
    model: str
    kind: str
    free: int
    total: int


@dataclass(frozen=True)
class GpuMap:
    nodes: list[NodeMap]
    models: list[ModelCount] = field(default_factory=list)
    filtered: bool = False  # cells carry `matching` for a claim's class and selector

    @property
    def total(self) -> int:
        return sum(len(node.devices) for node in self.nodes)

    @property
    def legend(self) -> tuple[tuple[str, str, Any], ...]:
        return LEGEND

    @property
    def free(self) -> int:
        return sum(node.free for node in self.nodes)

    def node(self, name: str) -> NodeMap | None:
        return next((node for node in self.nodes if node.name == name), None)


def whose(*, owner_id: int, owner_team_id: int | None, viewer: Any, viewer_teams: set[int]) -> str:
    """A claim as the viewer sees it: theirs, their team's (the team charged for it, its
    owner's first) or someone else's."""
    if owner_id == viewer.pk:
        return MINE
    return TEAM if owner_team_id is not None and owner_team_id in viewer_teams else OTHER


def outside_holds(inv: dict[str, Any], *, shown: bool) -> list[Hold]:
    """What claims made outside the portal hold, one Hold per claim; namespace and claim name
    only when `shown` (an admin): another team's names are not the portal's to show."""
    by_claim: dict[tuple[str, str, str, str], set[DeviceId]] = {}
    for row in inventory.held_outside(inv):
        asked = ""
        if row.get("kind") == POD_HOLDING:
            asked = inventory.requested_as(inv, row.get("device_classes") or [])
        key = (row.get("kind", ""), row.get("namespace", ""), row.get("name", ""), asked)
        by_claim.setdefault(key, set()).add((row["driver"], row["pool"], row["device"]))
    return [
        Hold(
            claim_id=-number,
            claim_name=name if shown else "",
            namespace=namespace if shown else "",
            owner="",
            devices=frozenset(devices),
            shown=shown,
            whose=OUTSIDE,
            requested_as=asked,
        )
        for number, ((_, namespace, name, asked), devices) in enumerate(sorted(by_claim.items()), 1)
    ]


def device_id(device: dict[str, Any]) -> DeviceId:
    return (device["driver"], device["pool"], device["name"])


def allocated_ids(allocation: dict[str, Any] | None) -> frozenset[DeviceId]:
    """The devices of a stored allocation (ClaimRequest.allocation)."""
    return frozenset(
        (d.get("driver", ""), d.get("pool", ""), d.get("device", ""))
        for d in (allocation or {}).get("devices", [])
    )


def build(
    inv: dict[str, Any],
    holds: Iterable[Hold],
    *,
    highlight: Iterable[DeviceId] = (),
    matching: set[DeviceId] | None = None,
    nodes: Iterable[str] | None = None,
    usage: dict[tuple[str, str], Any] | None = None,
) -> GpuMap:
    """The map of the inventory's devices; `nodes` limits it to those nodes; `usage`
    (claims.read.utilisation.devices_usage, by (pool, device)) colours held ones by use."""
    holder = {device: hold for hold in holds for device in hold.devices}
    marked = set(highlight)
    wanted = set(nodes) if nodes is not None else None
    by_node: dict[str, list[DeviceCell]] = {}
    for device in inv.get("devices", []):
        node = device.get("node") or device["pool"]
        if wanted is not None and node not in wanted:
            continue
        key = device_id(device)
        cell = _cell(device, holder.get(key), key in marked, matching is None or key in matching)
        if usage and (now := usage.get((device["pool"], device["name"]))) is not None:
            cell = replace(cell, activity=now.activity)
        by_node.setdefault(node, []).append(cell)
    node_maps = [NodeMap(name, _cards(cells)) for name, cells in sorted(by_node.items())]
    return GpuMap(node_maps, _model_counts(node_maps), filtered=matching is not None)


def _cell(
    device: dict[str, Any], hold: Hold | None, highlighted: bool, matching: bool
) -> DeviceCell:
    attributes, capacity = device.get("attributes", {}), device.get("capacity", {})
    return DeviceCell(
        driver=device["driver"],
        pool=device["pool"],
        name=device["name"],
        kind="mig" if attributes.get("type") == "mig" else "gpu",
        model=str(attributes.get("productName") or device["name"]),
        memory=str(capacity.get("memory", "")),
        profile=str(attributes.get("profile", "")),
        holder=hold,
        highlighted=highlighted,
        matching=matching,
        taints=tuple(inventory.blocking_taints(device)),
    )


def _card_label(cell: DeviceCell) -> str:
    # The driver names a MIG device after its GPU: gpu-<minor>-mig-<profile>-<start>-<size>.
    return cell.name.split(MIG_SEPARATOR)[0] if cell.kind == "mig" else cell.name


def _cards(cells: list[DeviceCell]) -> list[Card]:
    grouped: dict[str, list[DeviceCell]] = {}
    for cell in cells:
        grouped.setdefault(_card_label(cell), []).append(cell)
    cards = []
    for label, members in grouped.items():
        memory = members[0].memory if len(members) == 1 and members[0].kind == "gpu" else ""
        in_place = sorted(members, key=lambda cell: _placement(cell.name))
        cards.append(Card(label, members[0].model, memory, in_place))
    return sorted(cards, key=lambda card: _natural(card.label))


def _placement(name: str) -> tuple[int, str]:
    """A MIG device's first memory slice (…-<profile>-<start>-<size>): the card's order."""
    parts = name.split("-")
    return (int(parts[-2]), name) if len(parts) > 2 and parts[-2].isdigit() else (-1, name)


def _natural(label: str) -> tuple[Any, ...]:
    """gpu-2 before gpu-10."""
    head, _, tail = label.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (label, -1)


def _model_counts(node_maps: list[NodeMap]) -> list[ModelCount]:
    totals: Counter[tuple[str, str]] = Counter()
    free: Counter[tuple[str, str]] = Counter()
    for node in node_maps:
        for cell in node.devices:
            key = (cell.model, cell.profile or gettext("whole GPU"))
            totals[key] += 1
            free[key] += 1 if cell.free else 0
    return [
        ModelCount(model, kind, free[(model, kind)], total)
        for (model, kind), total in sorted(totals.items())
    ]
