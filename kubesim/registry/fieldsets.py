"""Field sets as structured-merge-diff computes them: which lists are keyed maps, sets or
atomic, which structs are atomic, and the comparison an Update's managedFields come from.

A path is a tuple of fieldsV1 elements (`f:name`, `k:{...}`, `v:...`); a map or list that is
itself a member of a set, not only its children, ends in `.`, as fieldsV1 writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]
ABSENT = object()

# x-kubernetes-list-map-keys of the associative lists kubesim's kinds carry, by field name.
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "resourceClaims": ("name",),
    "claims": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "volumeMounts": ("mountPath",),
    "ports": ("containerPort", "protocol"),
    "imagePullSecrets": ("name",),
    "reservedFor": ("uid",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "resourceClaimStatuses": ("name",),
    "podIPs": ("ip",),
}
# Lists of `+listType=set` (items named `v:<value>`), by their place.
SET_LISTS: set[Path] = {("f:metadata", "f:finalizers")}
# `+structType=atomic` structs and `+mapType=atomic` maps (a Pod's nodeSelector, an
# allocation's NodeSelector): owned as one leaf, never field by field.
ATOMIC_FIELDS = {
    "nodeSelector",
    "involvedObject",
    "regarding",
    "related",
    "fieldRef",
    "resourceFieldRef",
    "configMapKeyRef",
    "secretKeyRef",
    "labelSelector",
    "namespaceSelector",
    "requiredDuringSchedulingIgnoredDuringExecution",
}
ATOMIC_ITEMS = {"ownerReferences"}
# Metadata the field manager strips: never part of anyone's field set.
SYSTEM_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
}
# What a new, empty object of a kind already holds as the field manager sees it (Go structs
# that are not omitempty): a map or list there is not new, so it gets no `.` of its own.
EMPTY_OBJECTS: dict[str, dict[str, Any]] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "ResourceClaim": {"spec": {"devices": {}}, "status": {}},
    "ResourceClaimTemplate": {"spec": {"metadata": {}, "spec": {"devices": {}}}},
    "Namespace": {"spec": {}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {}}, "nodeInfo": {}}},
    "DeviceClass": {"spec": {}},
    "ResourceSlice": {"spec": {"pool": {}}},
}


def field_name(element: str) -> str:
    return element[2:] if element.startswith("f:") else ""


def is_atomic_map(path: Path) -> bool:
    return bool(path) and field_name(path[-1]) in ATOMIC_FIELDS


def list_kind(path: Path) -> str:
    """`map`, `set` or `atomic`: how the list at `path` merges."""
    name = field_name(path[-1]) if path else ""
    if name in LIST_MAP_KEYS:
        return "map"
    if path in SET_LISTS:
        return "set"
    return "atomic"


def item_element(path: Path, item: Any) -> str | None:
    """The path element of one list item (`k:{...}` or `v:...`); None when it has none."""
    if list_kind(path) == "set":
        return "v:" + json.dumps(item, separators=(",", ":"))
    keys = LIST_MAP_KEYS.get(field_name(path[-1]), ())
    if not isinstance(item, dict) or not keys:
        return None
    key = {name: item.get(name) for name in sorted(keys) if name in item}
    return "k:" + json.dumps(key, separators=(",", ":"))


def items_atomic(path: Path) -> bool:
    return field_name(path[-1]) in ATOMIC_ITEMS


def with_empty_object(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """`obj` (or nothing) with the fields every object of `kind` holds."""
    return _under({"metadata": {}, **EMPTY_OBJECTS.get(kind, {})}, obj or {})


def _under(base: Any, obj: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(obj, dict):
        return obj
    merged = dict(obj)
    for key, value in base.items():
        merged[key] = _under(value, obj[key]) if key in obj else value
    return merged


@dataclass
class Comparison:
    """typed.Comparison: leaves and members added, modified and removed."""

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    def changed(self) -> set[Path]:
        return self.added | self.modified

    def without(self, top_level: tuple[str, ...]) -> Comparison:
        """FilterFields: without what lies under the given top-level fields."""

        def keep(paths: set[Path]) -> set[Path]:
            return {path for path in paths if path[0] not in top_level}

        return Comparison(keep(self.added), keep(self.modified), keep(self.removed))


def compare(old: dict[str, Any] | None, new: dict[str, Any]) -> Comparison:
    """What changed from `old` to `new`, as TypedValue.Compare reports it."""
    comparison = Comparison()
    kind = new.get("kind", "")
    lhs, rhs = with_empty_object(old, kind), with_empty_object(new, kind)
    for key in _keys(lhs, rhs):
        if key in ("apiVersion", "kind"):
            continue
        _walk(lhs.get(key, ABSENT), rhs.get(key, ABSENT), (f"f:{key}",), comparison)
    return comparison


def _keys(lhs: Any, rhs: Any) -> list[str]:
    left = list(lhs) if isinstance(lhs, dict) else []
    right = list(rhs) if isinstance(rhs, dict) else []
    return left + [key for key in right if key not in left]


def _walk(lhs: Any, rhs: Any, path: Path, comparison: Comparison) -> None:
    if path[:1] == ("f:metadata",) and len(path) == 2 and field_name(path[1]) in SYSTEM_METADATA:
        return
    if isinstance(lhs, dict) or isinstance(rhs, dict):
        _walk_map(lhs, rhs, path, comparison)
    elif isinstance(lhs, list) or isinstance(rhs, list):
        _walk_list(lhs, rhs, path, comparison)
    else:
        _leaf(lhs, rhs, path, comparison)


def _leaf(lhs: Any, rhs: Any, path: Path, comparison: Comparison) -> None:
    if lhs is ABSENT and rhs is ABSENT:
        return
    if lhs is ABSENT:
        comparison.added.add(path)
    elif rhs is ABSENT:
        comparison.removed.add(path)
    elif lhs != rhs:
        comparison.modified.add(path)


def _member(lhs: Any, rhs: Any, path: Path, comparison: Comparison) -> None:
    """The postItemHook: a map or list that is new (or gone) is a member itself."""
    if lhs is ABSENT:
        comparison.added.add((*path, "."))
    elif rhs is ABSENT:
        comparison.removed |= {path, (*path, ".")}


def _walk_map(lhs: Any, rhs: Any, path: Path, comparison: Comparison) -> None:
    left = lhs if isinstance(lhs, dict) else {}
    right = rhs if isinstance(rhs, dict) else {}
    if is_atomic_map(path) or (not left and not right):
        _leaf(lhs, rhs, path, comparison)
        return
    for key in _keys(left, right):
        _walk(left.get(key, ABSENT), right.get(key, ABSENT), (*path, f"f:{key}"), comparison)
    _member(lhs, rhs, path, comparison)


def _walk_list(lhs: Any, rhs: Any, path: Path, comparison: Comparison) -> None:
    left = _items(lhs, path)
    right = _items(rhs, path)
    if list_kind(path) == "atomic" or (not left and not right) or left is None or right is None:
        _leaf(lhs, rhs, path, comparison)
        return
    for element in [*left, *(e for e in right if e not in left)]:
        item_path = (*path, element)
        before, after = left.get(element, ABSENT), right.get(element, ABSENT)
        if list_kind(path) == "set" or items_atomic(path):
            _leaf(before, after, item_path, comparison)
        else:
            _walk(before, after, item_path, comparison)
    _member(lhs, rhs, path, comparison)


def _items(value: Any, path: Path) -> dict[str, Any] | None:
    """The list's items by path element, first occurrence winning; None when an item has no
    key (then the list compares as one leaf)."""
    if not isinstance(value, list):
        return {}
    items: dict[str, Any] = {}
    for item in value:
        element = item_element(path, item)
        if element is None:
            return None
        items.setdefault(element, item)
    return items
