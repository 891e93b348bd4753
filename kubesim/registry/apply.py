"""Server-side apply: field ownership in `metadata.managedFields`, conflicts, force."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from kubesim.base import errors
from kubesim.registry.fieldsets import (
    SYSTEM_METADATA,
    Path,
    compare,
    is_atomic_map,
    item_element,
    items_atomic,
    list_kind,
)
from kubesim.registry.patch import strategic_merge
from kubesim.registry.store import now_rfc3339

MISSING = object()


def field_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """The field set of an applied configuration (ToFieldSet)."""
    paths: set[Path] = set()
    for key, value in obj.items():
        if not prefix and key in ("apiVersion", "kind"):
            continue
        if prefix == ("f:metadata",) and key in SYSTEM_METADATA:
            continue
        paths |= _value_paths(value, (*prefix, f"f:{key}"))
    return paths


def _value_paths(value: Any, path: Path) -> set[Path]:
    if isinstance(value, dict) and value and not is_atomic_map(path):
        return field_paths(value, path)
    if isinstance(value, list) and value and list_kind(path) != "atomic":
        paths: set[Path] = set()
        for item in value:
            element = item_element(path, item)
            if element is None:
                return {path}
            item_path = (*path, element)
            if isinstance(item, dict) and not items_atomic(path):
                paths |= {(*item_path, ".")} | field_paths(item, item_path)
            else:
                paths.add(item_path)
        return paths
    return {path}


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        if part == ".":
            return node
        if part.startswith("f:") and isinstance(node, dict) and part[2:] in node:
            node = node[part[2:]]
        elif part.startswith("k:") and isinstance(node, list):
            node = _find_item(node, json.loads(part[2:]))
            if node is MISSING:
                return MISSING
        elif part.startswith("v:") and isinstance(node, list):
            node = json.loads(part[2:]) if json.loads(part[2:]) in node else MISSING
            if node is MISSING:
                return MISSING
        else:
            return MISSING
    return node


def _find_item(items: list[Any], key: dict[str, Any]) -> Any:
    for item in items:
        if isinstance(item, dict) and all(item.get(k) == v for k, v in key.items()):
            return item
    return MISSING


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part, {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for part, child in tree.items():
        path = (*prefix, part)
        paths |= from_fields_v1(child, path) if child else {path}
    return paths


def _leaves(paths: set[Path]) -> set[Path]:
    return {path for path in paths if path[-1] != "."}


def _entries(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not obj:
        return []
    return copy.deepcopy(obj.get("metadata", {}).get("managedFields") or [])


def _sent_entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The managedFields a client sent, as the server decodes them (times in whole seconds,
    UTC); none when they do not decode, and the server keeps the stored ones."""
    entries = _entries(obj)
    try:
        for entry in entries:
            if entry.get("time"):
                when = datetime.fromisoformat(str(entry["time"]).replace("Z", "+00:00"))
                entry["time"] = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, TypeError, AttributeError):
        return []
    return entries


def _owned(entry: dict[str, Any]) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _same_owner(entry: dict[str, Any], manager: str, operation: str, subresource: str) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == operation
        and entry.get("subresource", "") == subresource
    )


def _conflicts(
    live: dict[str, Any],
    config: dict[str, Any],
    entries: list[dict[str, Any]],
    manager: str,
    api_version: str,
) -> list[tuple[dict[str, Any], Path]]:
    found = []
    wanted = _leaves(field_paths(config))
    for entry in entries:
        if entry.get("manager") == manager or entry.get("apiVersion") != api_version:
            continue
        for path in sorted(_leaves(_owned(entry)) & wanted):
            if value_at(live, path) != value_at(config, path):
                found.append((entry, path))
    return found


def _manager_text(entry: dict[str, Any]) -> str:
    """How apimachinery's printManager names the owner of a conflicting field."""
    text = f'"{entry["manager"]}"'
    if entry.get("subresource"):
        text += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion')}"
        if entry.get("time"):
            text += f" at {entry['time']}"
    return text


def conflict_error(conflicts: list[tuple[dict[str, Any], Path]]) -> errors.ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_manager_text(entry)}",
            "field": render_path(path),
        }
        for entry, path in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"conflict with {_manager_text(entry)}: {render_path(path)}"
        return errors.ApiError(
            409, "Conflict", f"Apply failed with 1 conflict: {message}", {"causes": causes}
        )
    by_manager: dict[str, list[str]] = {}
    for entry, path in conflicts:
        by_manager.setdefault(_manager_text(entry), []).append(render_path(path))
    lines = []
    for manager in sorted(by_manager):
        lines += [f"conflicts with {manager}:", *(f"- {p}" for p in by_manager[manager])]
    message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, {"causes": causes})


def render_path(path: Path) -> str:
    rendered = ""
    for part in path:
        if part.startswith("f:"):
            rendered += "." + part[2:]
        elif part.startswith("k:"):
            rendered += (
                "["
                + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(part[2:]).items())
                + "]"
            )
    return rendered


def _remove_path(obj: Any, path: Path) -> None:
    parent = value_at(obj, path[:-1]) if path[-1] != "." else value_at(obj, path[:-2])
    last = path[-1] if path[-1] != "." else path[-2]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        item = _find_item(parent, json.loads(last[2:]))
        if item is not MISSING:
            parent.remove(item)


def _prune_empty(obj: dict[str, Any], path: Path) -> None:
    for depth in range(len(path) - 1, 0, -1):
        node = value_at(obj, path[:depth])
        if node == {} and path[depth - 1].startswith("f:"):
            _remove_path(obj, path[:depth])


def server_side_apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    subresource: str = "",
) -> dict[str, Any]:
    """The object after `manager` applies `config` to `live` (both in the request's version)."""
    entries = _entries(live)
    base = copy.deepcopy(live) if live else {}
    conflicts = _conflicts(base, config, entries, manager, api_version) if live else []
    if conflicts and not force:
        raise conflict_error(conflicts)
    applied = field_paths(config)
    mine = next((e for e in entries if _same_owner(e, manager, "Apply", subresource)), None)
    previously = _owned(mine) if mine else set()
    others = set().union(*(_owned(e) for e in entries if e is not mine))
    for path in sorted(previously - applied - others, key=len, reverse=True):
        _remove_path(base, path)
        _prune_empty(base, path)
    wanted = {k: v for k, v in config.items() if k != "status" or subresource}
    result = strategic_merge(base, wanted)
    result.setdefault("metadata", {})["managedFields"] = _after_apply(
        entries,
        mine,
        applied,
        {path for _, path in conflicts},
        manager=manager,
        api_version=api_version,
        subresource=subresource,
    )
    return result


def _after_apply(
    entries: list[dict[str, Any]],
    mine: dict[str, Any] | None,
    applied: set[Path],
    taken: set[Path],
    *,
    manager: str,
    api_version: str,
    subresource: str,
) -> list[dict[str, Any]]:
    for entry in entries:
        if entry is not mine and taken & _owned(entry):
            entry["fieldsV1"] = to_fields_v1(_owned(entry) - taken)
    if mine is None:
        mine = {"manager": manager, "operation": "Apply"}
        entries.append(mine)
    if mine.get("fieldsV1") != to_fields_v1(applied) or mine.get("apiVersion") != api_version:
        mine.update(apiVersion=api_version, time=now_rfc3339(), fieldsType="FieldsV1")
        mine["fieldsV1"] = to_fields_v1(applied)
    if subresource:
        mine["subresource"] = subresource
    return [entry for entry in entries if entry.get("fieldsV1")]


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    api_version: str,
    subresource: str = "",
    reset: tuple[str, ...] = (),
) -> None:
    """Record in `new` the managedFields after `manager` updated `old` to `new` (both in the
    request's version), as the field manager does: every other owner loses what changed or
    went away, the writer owns what it changed. `reset`: top-level fields (`f:status`) the
    strategy resets, which no write of this kind owns. managedFields sent with a main-resource
    write replace the stored ones, as upstream lets a client edit them."""
    entries = (not subresource and _sent_entries(new)) or _entries(old)
    comparison = compare(old, new).without(reset)
    changed = comparison.changed()
    for entry in entries:
        entry["fieldsV1"] = to_fields_v1(_owned(entry) - changed - comparison.removed)
    if changed:
        mine = next((e for e in entries if _same_owner(e, manager, "Update", subresource)), None)
        if mine is None:
            mine = {"manager": manager, "operation": "Update"}
            entries.append(mine)
        owned = _owned(mine) if mine.get("fieldsV1") else set()
        mine.update(apiVersion=api_version, time=now_rfc3339(), fieldsType="FieldsV1")
        mine["fieldsV1"] = to_fields_v1(owned | changed)
        if subresource:
            mine["subresource"] = subresource
    kept_entries = [entry for entry in entries if entry.get("fieldsV1")]
    if kept_entries:
        new.setdefault("metadata", {})["managedFields"] = kept_entries
    else:
        new.get("metadata", {}).pop("managedFields", None)
