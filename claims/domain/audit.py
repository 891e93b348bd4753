"""The one way an action enters the audit trail: `record` (and `record_change`, a state change).

Where an action came from (web, API, admin, or the system; client address and user agent)
is taken from the request being served, which claims.web.audit_middleware keeps in
`current_request`; the workers serve none, so their rows say "system". Rows are never changed
or deleted: a PostgreSQL trigger refuses it (migration 0017). The hooks that call `record`
(logins, tokens, admins' edits) are in claims.domain.audit_receivers.
"""

from __future__ import annotations

import hashlib
import json
from contextvars import ContextVar
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.http import HttpRequest

from claims.models import AuditEvent
from claims.policy.client_address import client_ip

Action = AuditEvent.Action
Kind = AuditEvent.Kind
Channel = AuditEvent.Channel

CHANNELS = (("/api/", Channel.API), ("/admin/", Channel.ADMIN))

# The request being served (set by claims.web.audit_middleware.AuditContextMiddleware).
current_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)


def current_user() -> Any:
    """Who is making the request being served (None for the workers and anonymous users)."""
    user = getattr(current_request.get(), "user", None)
    return user if user is not None and user.is_authenticated else None


def _where(request: HttpRequest | None) -> dict[str, Any]:
    if request is None:
        return {"channel": Channel.SYSTEM}
    path = request.path
    channel = next((c for prefix, c in CHANNELS if path.startswith(prefix)), Channel.WEB)
    agent = request.headers.get("User-Agent", "")[:300]
    return {"channel": channel, "client_ip": client_ip(request) or None, "user_agent": agent}


class AuditEncoder(DjangoJSONEncoder):
    """Times as ISO 8601, rows as their id, anything else odd as its text."""

    def default(self, o: Any) -> Any:
        if isinstance(o, models.Model):
            return o.pk
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def manifest_sha256(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest as canonical JSON: keys sorted, no spaces, UTF-8."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def record(
    action: str,
    *,
    kind: str,
    object_id: Any = None,
    name: str = "",
    owner_id: int | None = None,
    actor: Any = None,
    message: str = "",
    request: HttpRequest | None = None,
    **details: Any,
) -> AuditEvent:
    """Write one audit row. details: from_state, to_state, before, after, manifest_sha256,
    allocation, result. request defaults to the one being served."""
    user = actor if actor is not None and actor.is_authenticated else None
    for field in ("before", "after", "allocation", "result"):
        if details.get(field) is not None:
            details[field] = json.loads(json.dumps(details[field], cls=AuditEncoder))
    return AuditEvent.objects.create(
        action=action,
        actor=user,
        actor_username=user.get_username() if user else "",
        object_kind=kind,
        object_id=object_id if isinstance(object_id, int) else None,
        object_name=str(name)[:253],
        owner_id=owner_id,
        message=message,
        **_where(request or current_request.get()),
        **details,
    )


# --- State changes of requests and runs (called by claims.domain.transitions) ---

STATEFUL_KINDS = {
    "namespacerequest": Kind.NAMESPACE_REQUEST,
    "claimrequest": Kind.CLAIM_REQUEST,
    "verificationrun": Kind.VERIFICATION_RUN,
    "workload": Kind.WORKLOAD,
}
# Bookkeeping that every transition writes; the row says it in its own columns or not at all.
UNRECORDED = {"state", "state_message", "updated", "next_attempt_at", "cluster_waits"}
OWN_COLUMNS = {"applied_manifest", "allocation", "devices"}
# fmt: off
RESULT_FIELDS = ("passed", "vector_add_passed", "device_query_passed", "device_name",
                 "compute_capability", "memory_mib")
# fmt: on


def record_change(
    obj: Any,
    *,
    actor: Any,
    from_state: str,
    to_state: str,
    message: str,
    fields: dict[str, Any] | None = None,
    action: str = "",
) -> AuditEvent:
    """A request's or a run's state change (or note), with what the change wrote."""
    fields = fields or {}
    changed = from_state != to_state
    return record(
        action or (Action.STATE_CHANGE if changed else Action.NOTE),
        kind=STATEFUL_KINDS[obj._meta.model_name],
        object_id=obj.pk,
        name=getattr(obj, "name", "") or getattr(obj, "pod_name", ""),
        owner_id=obj.owner_id,
        actor=actor,
        message=message,
        from_state=from_state,
        to_state=to_state,
        **_change_details(from_state, to_state, fields) if changed else {},
    )


def _change_details(from_state: str, to_state: str, fields: dict[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in fields.items() if k not in UNRECORDED | OWN_COLUMNS}
    details: dict[str, Any] = {
        "before": {"state": from_state} if from_state else None,
        "after": {"state": to_state, **{k: v for k, v in plain.items() if k not in RESULT_FIELDS}},
    }
    if fields.get("applied_manifest"):
        details["manifest_sha256"] = manifest_sha256(fields["applied_manifest"])
    if fields.get("allocation") or fields.get("devices"):
        details["allocation"] = fields.get("allocation") or fields.get("devices")
    if "passed" in fields:
        details["result"] = {k: fields[k] for k in RESULT_FIELDS if k in fields}
    return details
