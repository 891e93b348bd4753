"""The page forms: choices scoped to the user and the cluster, tokens, service errors."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from claims.models import Cluster, NamespaceRequest
from claims.web.forms import ClaimRequestForm, NamespaceRequestForm, RejectForm
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)


def test_it_offers_every_known_cluster(cluster: Cluster) -> None:
    form = NamespaceRequestForm()
    assert list(form.fields["cluster"].queryset) == [cluster]


def test_it_gives_each_rendered_form_its_own_token(cluster: Cluster) -> None:
    first, second = NamespaceRequestForm(), NamespaceRequestForm()
    assert first["submission_token"].value()
    assert first["submission_token"].value() != second["submission_token"].value()


def test_it_offers_only_the_users_live_namespaces(namespace: NamespaceRequest, bob: User) -> None:
    assert list(ClaimRequestForm(user=namespace.owner).fields["namespace_request"].queryset) == [
        namespace
    ]
    assert not ClaimRequestForm(user=bob).fields["namespace_request"].queryset.exists()


def test_it_lists_device_classes_with_their_device_counts(namespace: NamespaceRequest) -> None:
    form = ClaimRequestForm(user=namespace.owner)
    assert form.fields["device_class"].widget.choices == [
        ("gpu.nvidia.com", "gpu.nvidia.com (2 devices on kubesim)"),
        ("mig.nvidia.com", "mig.nvidia.com (0 devices on kubesim)"),
    ]


def test_it_puts_service_errors_next_to_their_fields(namespace: NamespaceRequest) -> None:
    form = ClaimRequestForm({"namespace_request": namespace.pk}, user=namespace.owner)
    form.is_valid()
    error = ValidationError(
        {"count": ["Ask for at least 1 device."], NON_FIELD_ERRORS: ["The claim is released."]}
    )
    form.add_service_errors(error)
    assert form.errors["count"] == ["Ask for at least 1 device."]
    assert "The claim is released." in form.non_field_errors()


def test_it_shows_errors_of_fields_the_form_lacks_on_top(namespace: NamespaceRequest) -> None:
    form = ClaimRequestForm({}, user=namespace.owner)
    form.is_valid()
    form.add_service_errors(ValidationError({"reason": ["Say why."]}))
    assert "Say why." in form.non_field_errors()


def test_it_requires_a_reason_to_reject() -> None:
    form = RejectForm({"reason": ""})
    assert not form.is_valid()
    assert form.errors["reason"] == ["Say why, so the requester knows what to change."]
