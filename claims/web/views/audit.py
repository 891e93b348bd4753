"""The audit trail for approvers and staff: every action, filtered, a page at a time or as CSV.

Pages go back in time by id (`?before=`), an indexed range however deep, with no count.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required as django_login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET

from claims.models import AuditEvent
from claims.read import selectors
from claims.read.audit_trail import AuditTrailFilter, trail
from claims.web.views.common import login_required

PAGE_SIZE = 50
MAX_ID = 2**63 - 1  # ids are 64-bit: a larger ?before= is ignored, not a database error
# A spreadsheet runs a cell starting with one of these as a formula (CSV injection): names,
# messages and user agents come from users, so such a cell gets a leading apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# fmt: off
CSV_COLUMNS = ["id", "created", "action", "actor_username", "channel", "client_ip", "user_agent",
               "object_kind", "object_id", "object_name", "owner_id", "from_state", "to_state",
               "message", "before", "after", "manifest_sha256", "allocation", "result"]
# fmt: on


def _require_auditor(request: HttpRequest) -> None:
    if not selectors.user_is_approver(request.user):
        raise PermissionDenied(gettext("Only approvers and staff see the audit trail."))


def _filtered(request: HttpRequest) -> AuditTrailFilter:
    return AuditTrailFilter(request.GET, queryset=trail(user=request.user))


def _older_than(request: HttpRequest) -> int | None:
    before = request.GET.get("before", "")
    return (
        int(before) if before.isdecimal() and before.isascii() and int(before) <= MAX_ID else None
    )


@login_required
@require_GET
def audit_trail(request: HttpRequest) -> HttpResponse:
    _require_auditor(request)
    filters = _filtered(request)
    events = filters.qs if filters.is_valid() else AuditEvent.objects.none()
    before = _older_than(request)
    if before is not None:
        events = events.filter(id__lt=before)
    rows = list(events[: PAGE_SIZE + 1])
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "nav": "audit",
        "filters": filters,
        "events": [_with_json(event) for event in rows[:PAGE_SIZE]],
        "older": rows[PAGE_SIZE - 1].pk if len(rows) > PAGE_SIZE else None,
        "paged": before is not None,
        "query": query.urlencode(),
        "actions": AuditEvent.Action.choices,
        "chosen_actions": request.GET.getlist("action"),
        "kinds": AuditEvent.Kind.choices,
    }
    return render(request, "claims/audit.html", context)


@django_login_required  # a download, never an htmx request
@require_GET
def audit_export(request: HttpRequest) -> HttpResponseBase:
    """The rows the same filters show, all of them, streamed as CSV (oldest first)."""
    _require_auditor(request)
    filters = _filtered(request)
    if not filters.is_valid():
        errors = json.dumps(filters.errors.get_json_data())
        return HttpResponse(errors, status=400, content_type="application/json")
    writer = csv.writer(_Echo())
    rows = _csv_rows(filters.qs.order_by("id"))
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="audit-trail.csv"'
    return response


def _with_json(event: AuditEvent) -> AuditEvent:
    """The JSON columns as indented JSON text for the page (event.json.before, ...)."""
    columns = ("before", "after", "allocation", "result")
    event.json = {c: json.dumps(getattr(event, c), indent=1, sort_keys=True) for c in columns}  # type: ignore[attr-defined]
    return event


class _Echo:
    """csv.writer writes a row here and gets it back, for the streaming response."""

    def write(self, value: str) -> str:
        return value


def _csv_rows(events: QuerySet[AuditEvent]) -> Iterator[list[Any]]:
    yield CSV_COLUMNS
    for values in events.values_list(*CSV_COLUMNS).iterator(chunk_size=500):
        yield [_cell(value) for value in values]


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
