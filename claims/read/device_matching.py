"""Which devices of an inventory a device class and a selector pick, as the scheduler decides
(an error is no match), and a memo so a read of many claims asking alike evaluates the CEL once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from claims.read import inventory
from claims.read.gpu_map import DeviceId, device_id

# Within matching_memo: the inventory remembered and its matches by (class, selector).
_MEMO: ContextVar[tuple[dict[str, Any], dict[tuple[str, str], set[DeviceId]]] | None] = ContextVar(
    "matching_memo", default=None
)


@contextmanager
def matching_memo(inv: dict[str, Any]) -> Iterator[None]:
    """Within it, each (class, selector) is matched against the inventory's devices once: a
    queue of many claims asking alike evaluates their CEL once, not once per claim and use."""
    token = _MEMO.set((inv, {}))
    try:
        yield
    finally:
        _MEMO.reset(token)


def matching_ids(inv: dict[str, Any], device_class: str, selector: str) -> set[DeviceId]:
    """Devices of the class whose selectors, and the claim's own, hold (as the scheduler
    evaluates them: an error is no match)."""
    memo = _MEMO.get()
    if memo is None or memo[0] is not inv:
        return _matching_ids(inv, device_class, selector)
    found = memo[1].get((device_class, selector))
    if found is None:
        found = memo[1][(device_class, selector)] = _matching_ids(inv, device_class, selector)
    return set(found)


def _matching_ids(inv: dict[str, Any], device_class: str, selector: str) -> set[DeviceId]:
    classes = {dc["name"]: dc["selectors"] for dc in inv.get("device_classes", [])}
    if device_class not in classes:
        return set()
    expressions = [*classes[device_class], *([selector] if selector else [])]
    return {
        device_id(device)
        for device in inv.get("devices", [])
        if inventory.matches(expressions, device)
    }
