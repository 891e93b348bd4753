"""Events as the 1.34 scheduler records them, and the events.k8s.io/v1 view of stored Events.

The scheduler writes through client-go's events.k8s.io recorder: `eventTime`, `action`,
`reportingController`, no `count` or first/last timestamps. The API server stores every Event
as core/v1 (the two resources share storage), so each is readable through both APIs.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any

GROUP = "events.k8s.io"
API_VERSION = f"{GROUP}/v1"
# events.k8s.io/v1 field -> core/v1 field (pkg/apis/events/v1/conversion.go); the rest keep
# their name. In events.k8s.io/v1 order, as the API server sends them.
RENAMED = {
    "reportingController": "reportingComponent",
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
EVENTS_V1_ORDER = (
    "eventTime",
    "series",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
# Fields the recorder sets, as kube-scheduler's managedFields entry lists them.
RECORDED_FIELDS = (
    "action",
    "eventTime",
    "note",
    "reason",
    "regarding",
    "reportingController",
    "reportingInstance",
    "type",
)

_last_ns = 0
_ns_lock = threading.Lock()


def unique_nanoseconds() -> int:
    """Recorders name events <object>.<UnixNano in hex>, so listing them is chronological;
    two events in one nanosecond still get different names."""
    global _last_ns
    with _ns_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return _last_ns


def micro_time(nanoseconds: int) -> str:
    """metav1.MicroTime's JSON form."""
    stamp = datetime.fromtimestamp(nanoseconds / 1e9, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def scheduler_event(
    regarding: dict[str, Any], event_type: str, reason: str, action: str, note: str
) -> dict[str, Any]:
    """The core/v1 form of an Event the 1.34 scheduler records about a Pod."""
    nanoseconds = unique_nanoseconds()
    stamp = micro_time(nanoseconds)
    controller = "default-scheduler"
    managed = {
        "manager": "kube-scheduler",
        "operation": "Update",
        "apiVersion": API_VERSION,
        "time": stamp[:19] + "Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {f"f:{field}": {} for field in RECORDED_FIELDS},
    }
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{regarding['name']}.{nanoseconds:x}",
            "namespace": regarding["namespace"],
            "managedFields": [managed],
        },
        "involvedObject": regarding,
        "reason": reason,
        "message": note,
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "type": event_type,
        "eventTime": stamp,
        "action": action,
        "reportingComponent": controller,
        "reportingInstance": f"{controller}-{socket.gethostname()}",
    }


def from_storage(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored (core/v1) Event as events.k8s.io/v1 serves it."""
    core_names = {core: v1 for v1, core in RENAMED.items()}
    renamed = {core_names.get(key, key): value for key, value in stored.items()}
    served: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Event"}
    served["metadata"] = renamed.get("metadata", {})
    served["eventTime"] = renamed.get("eventTime")
    for field in EVENTS_V1_ORDER[1:]:
        if field in renamed:
            served[field] = renamed[field]
    served.setdefault("deprecatedSource", {})
    served.setdefault("deprecatedFirstTimestamp", None)
    served.setdefault("deprecatedLastTimestamp", None)
    if not served.get("deprecatedCount"):
        served.pop("deprecatedCount", None)
    return served


def to_storage(sent: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event in its stored (core/v1) form."""
    stored = {RENAMED.get(key, key): value for key, value in sent.items()}
    stored["apiVersion"] = "v1"
    stored.setdefault("source", {})
    stored.setdefault("firstTimestamp", None)
    stored.setdefault("lastTimestamp", None)
    return stored
