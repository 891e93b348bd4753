"""Graceful deletion as the API server decides it (apiserver rest.BeforeDelete, markAsDeleting,
and the Pod strategy's CheckGracefulDelete).

A kind with graceful deletion (Pods) gets `deletionTimestamp` = now + grace period and
`deletionGracePeriodSeconds`, and stays until someone (the kubelet) deletes it again with grace
0; a later delete may only shorten the period. A kind without it is removed at once, unless
finalizers hold it: then it gets `deletionTimestamp` = now and `deletionGracePeriodSeconds: 0`
(a Namespace instead goes `Terminating`, without a grace period, as its own REST code does).
The generation moves on when the deletion timestamp is first set.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from kubesim.base import errors

Action = Literal["remove", "update", "keep"]
DEFAULT_POD_GRACE_SECONDS = 30
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def pod_grace_seconds(pod: dict[str, Any], options: dict[str, Any]) -> int:
    """The grace period of a Pod delete (CheckGracefulDelete): the request's, else the Pod's
    terminationGracePeriodSeconds; 0 for a Pod never scheduled or already finished."""
    requested = options.get("gracePeriodSeconds")
    if isinstance(requested, int) and not isinstance(requested, bool):
        period = requested if requested >= 0 else 1  # a negative period counts as 1 s
    else:
        spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        period = spec_grace if isinstance(spec_grace, int) else DEFAULT_POD_GRACE_SECONDS
    if not (pod.get("spec") or {}).get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return period


def with_query(options: dict[str, Any], query_value: str | None) -> dict[str, Any]:
    """DeleteOptions with `?gracePeriodSeconds=` when the body does not set it."""
    if query_value is None or "gracePeriodSeconds" in options:
        return options
    try:
        return {**options, "gracePeriodSeconds": int(query_value)}
    except ValueError:
        raise errors.bad_request(f"invalid gracePeriodSeconds {query_value!r}") from None


def mark(obj: dict[str, Any], grace: int | None, pending_finalizers: bool) -> Action:
    """Set the deletion fields on `obj` (changed in place) for a delete with `grace` seconds
    (None: the kind has no graceful deletion) and say what the store does with it."""
    meta = obj.setdefault("metadata", {})
    if grace is not None and (
        meta.get("deletionGracePeriodSeconds") or not meta.get("deletionTimestamp")
    ):
        return _graceful(meta, grace, pending_finalizers)
    if not pending_finalizers:
        return "remove"
    if meta.get("deletionTimestamp"):
        return "keep"
    _first_mark(meta, _now())
    if obj.get("kind") == "Namespace":
        obj.setdefault("status", {})["phase"] = "Terminating"
    else:
        meta["deletionGracePeriodSeconds"] = 0
    return "update"


def _graceful(meta: dict[str, Any], grace: int, pending_finalizers: bool) -> Action:
    current = int(meta.get("deletionGracePeriodSeconds") or 0)
    if meta.get("deletionTimestamp"):
        if grace >= current:
            return "keep"  # a graceful deletion is pending: only a shorter one changes it
        started = _parse(meta["deletionTimestamp"]) - timedelta(seconds=current)
        meta["deletionTimestamp"] = _format(started + timedelta(seconds=grace))
    else:
        _first_mark(meta, _now() + timedelta(seconds=grace))
    meta["deletionGracePeriodSeconds"] = grace
    return "remove" if grace == 0 and not pending_finalizers else "update"


def _first_mark(meta: dict[str, Any], when: datetime) -> None:
    meta["deletionTimestamp"] = _format(when)
    if meta.get("generation"):
        meta["generation"] += 1


def _now() -> datetime:
    return datetime.now(UTC)


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, TIME_FORMAT).replace(tzinfo=UTC)


def _format(when: datetime) -> str:
    return when.strftime(TIME_FORMAT)
