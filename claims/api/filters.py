"""Query filters of the list endpoints: ?state=, ?cluster=, ?namespace=, ?owner=, ..."""

from __future__ import annotations

from datetime import UTC, datetime

import django_filters
from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from claims.models import AuditEvent, ClaimRequest, NamespaceRequest, VerificationRun


class OwnedFilter(django_filters.FilterSet):
    owner = django_filters.CharFilter(field_name="owner__username", help_text="Username.")


class NamespaceRequestFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=NamespaceRequest.State.choices)
    cluster = django_filters.NumberFilter(field_name="cluster_id", help_text="Cluster id.")

    class Meta:
        model = NamespaceRequest
        fields = ["state", "cluster", "name", "owner"]


class ClaimRequestFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=ClaimRequest.State.choices)
    cluster = django_filters.NumberFilter(field_name="namespace_request__cluster_id")
    namespace = django_filters.CharFilter(field_name="namespace_request__name")
    namespace_request = django_filters.NumberFilter(field_name="namespace_request_id")

    class Meta:
        model = ClaimRequest
        fields = ["state", "cluster", "namespace", "namespace_request", "name", "owner"]


class VerificationRunFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=VerificationRun.State.choices)
    cluster = django_filters.NumberFilter(field_name="claim__namespace_request__cluster_id")
    namespace = django_filters.CharFilter(field_name="claim__namespace_request__name")
    # Plain numbers, not model choices: an unknown id must not answer differently from
    # someone else's id.
    claim = django_filters.NumberFilter(field_name="claim_id")

    class Meta:
        model = VerificationRun
        fields = ["state", "claim", "cluster", "namespace", "owner"]


class AuditEventFilter(OwnedFilter):
    object_kind = django_filters.ChoiceFilter(choices=AuditEvent.Kind.choices)
    owner = django_filters.CharFilter(field_name="owner__username", help_text="Username.")
    since = django_filters.IsoDateTimeFilter(method="filter_since", help_text="ISO 8601 time.")

    class Meta:
        model = AuditEvent
        fields = ["object_kind", "object_id", "owner", "since"]

    def filter_since(self, queryset: QuerySet, name: str, value: datetime) -> QuerySet:
        # In UTC: PostgreSQL refuses offsets Python accepts (e.g. +17:00).
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValidationError({"since": ["That time is out of range."]}) from None
        return queryset.filter(created__gt=value)
