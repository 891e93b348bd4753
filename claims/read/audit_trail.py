"""The audit trail as pages, the CSV and the API read it: every row, and one set of filters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from claims.models import AuditEvent

Action = AuditEvent.Action
Kind = AuditEvent.Kind


class UtcDateTimeField(forms.DateTimeField):
    """A time (ISO 8601, or a date for its midnight) in UTC: PostgreSQL refuses offsets
    Python accepts (e.g. +17:00), so those are a field error here, not a 500 there."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        try:
            return parsed.astimezone(UTC) if parsed else None
        except OverflowError:
            raise forms.ValidationError("That time is out of range.") from None


class TimeFilter(django_filters.Filter):
    field_class = UtcDateTimeField


class AuditTrailFilter(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_username", help_text="Username.")
    action = django_filters.MultipleChoiceFilter(choices=Action.choices)
    object_kind = django_filters.ChoiceFilter(choices=Kind.choices)
    object_name = django_filters.CharFilter(help_text="Exactly this name.")
    since = TimeFilter(field_name="created", lookup_expr="gte", help_text="From (ISO 8601).")
    until = TimeFilter(field_name="created", lookup_expr="lt", help_text="Before (ISO 8601).")
    q = django_filters.CharFilter(
        method="filter_text",
        help_text="Text in the message, name, actor, address or manifest hash.",
    )

    class Meta:
        model = AuditEvent
        fields = ["actor", "action", "object_kind", "object_name", "since", "until", "q"]

    def filter_text(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        text = Q(message__icontains=value) | Q(object_name__icontains=value)
        text |= Q(actor_username__icontains=value) | Q(user_agent__icontains=value)
        text |= Q(manifest_sha256=value.lower()) | Q(client_ip__contains=value)
        return queryset.filter(text)


def trail(*, user: Any = None) -> QuerySet[AuditEvent]:
    """Every row, newest first (approvers and staff only: the callers check)."""
    return AuditEvent.objects.order_by("-id")
