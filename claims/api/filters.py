"""Query filters of the list endpoints: ?state=, ?cluster=, ?namespace=, ?owner=, ..."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

from claims.models import AuditEvent, ClaimRequest, NamespaceRequest, VerificationRun, Workload

# The database's ids are 64-bit: a larger number would be an error there, not a miss.
BIGINT = 2**63 - 1


@extend_schema_field({"type": "integer", "minimum": -BIGINT, "maximum": BIGINT})
class IdFilter(django_filters.NumberFilter):
    """An id: a whole number (django-filter's NumberFilter takes any decimal)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, min_value=-BIGINT, max_value=BIGINT, **kwargs)


@extend_schema_field(OpenApiTypes.BOOL)
class TrueFalseFilter(django_filters.TypedChoiceFilter):
    """true or false; anything else is a 400 (django-filter's BooleanFilter ignores it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        choices = [("true", "true"), ("false", "false")]
        super().__init__(*args, choices=choices, coerce=lambda v: v == "true", **kwargs)


@extend_schema_field({"type": "string", "pattern": "^[^\\u0000]*$"})
class TextFilter(django_filters.CharFilter):
    """Text without NUL characters (Django's form fields refuse those)."""


class StrictFilterSet(django_filters.FilterSet):
    """A parameter given but empty is refused rather than ignored, unless it is text."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        for name, field in self.filters.items():
            if self.data.get(name) == "" and not isinstance(field, django_filters.CharFilter):
                self.form.add_error(name, gettext("Give a value, or leave the parameter out."))
                valid = False
        return valid


class OwnedFilter(StrictFilterSet):
    owner = TextFilter(field_name="owner__username", help_text="Username.")


class NamespaceRequestFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=NamespaceRequest.State.choices)
    cluster = IdFilter(field_name="cluster_id", help_text="Cluster id.")
    name = TextFilter()

    class Meta:
        model = NamespaceRequest
        fields = ["state", "cluster", "name", "owner"]


class ClaimRequestFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=ClaimRequest.State.choices)
    cluster = IdFilter(field_name="namespace_request__cluster_id")
    namespace = TextFilter(field_name="namespace_request__name")
    namespace_request = IdFilter(field_name="namespace_request_id")
    name = TextFilter()

    class Meta:
        model = ClaimRequest
        fields = ["state", "cluster", "namespace", "namespace_request", "name", "owner"]


class VerificationRunFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=VerificationRun.State.choices)
    cluster = IdFilter(field_name="claim__namespace_request__cluster_id")
    namespace = TextFilter(field_name="claim__namespace_request__name")
    # Plain numbers, not model choices: an unknown id must not answer differently from
    # someone else's id.
    claim = IdFilter(field_name="claim_id")

    class Meta:
        model = VerificationRun
        fields = ["state", "claim", "cluster", "namespace", "owner"]


class WorkloadFilter(OwnedFilter):
    state = django_filters.MultipleChoiceFilter(choices=Workload.State.choices)
    kind = django_filters.ChoiceFilter(choices=Workload.Kind.choices)
    claim = IdFilter(field_name="claim_id")

    class Meta:
        model = Workload
        fields = ["state", "kind", "claim", "owner"]


class AuditEventFilter(OwnedFilter):
    object_kind = django_filters.ChoiceFilter(choices=AuditEvent.Kind.choices)
    owner = TextFilter(field_name="owner__username", help_text="Username.")
    object_id = IdFilter()
    since = django_filters.IsoDateTimeFilter(method="filter_since", help_text="ISO 8601 time.")

    class Meta:
        model = AuditEvent
        fields = ["object_kind", "object_id", "owner", "since"]

    def filter_since(self, queryset: QuerySet, name: str, value: datetime) -> QuerySet:
        # In UTC: PostgreSQL refuses offsets Python accepts (e.g. +17:00).
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValidationError({"since": [gettext("That time is out of range.")]}) from None
        return queryset.filter(created__gt=value)
