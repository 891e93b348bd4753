"""One set of caps for the web forms and the API, and a body limit that fits them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from rest_framework import serializers

from claims.api.views.actions import ReasonInput
from claims.api.views.namespaces import NamespaceRequestListApi
from claims.api.views.requests import ClaimListApi
from claims.models import Cluster, NamespaceRequest
from claims.policy import limits
from claims.web.forms import ClaimRequestForm, NamespaceRequestForm, RejectForm
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for


def api_cap(serializer: type[serializers.Serializer], field: str) -> int | None:
    return serializer().fields[field].max_length


def test_it_caps_the_same_fields_alike_on_forms_and_api(namespace: NamespaceRequest) -> None:
    claim_form = ClaimRequestForm(user=namespace.owner)
    pairs = [
        (
            NamespaceRequestForm().fields["purpose"],
            NamespaceRequestListApi.NamespaceRequestInput,
            "purpose",
        ),
        (
            NamespaceRequestForm().fields["name"],
            NamespaceRequestListApi.NamespaceRequestInput,
            "name",
        ),
        (claim_form.fields["purpose"], ClaimListApi.ClaimRequestInput, "purpose"),
        (claim_form.fields["name"], ClaimListApi.ClaimRequestInput, "name"),
        (claim_form.fields["device_class"], ClaimListApi.ClaimRequestInput, "device_class"),
        (RejectForm().fields["reason"], ReasonInput, "reason"),
    ]
    for form_field, serializer, name in pairs:
        assert form_field.max_length == api_cap(serializer, name), name
    assert api_cap(ClaimListApi.ClaimRequestInput, "purpose") == limits.PURPOSE_MAX_CHARS == 5000


def test_it_accepts_the_largest_legitimate_body() -> None:
    assert limits.largest_legitimate_body() <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_it_refuses_a_1_mb_purpose_next_to_the_field(namespace: NamespaceRequest) -> None:
    data = {"namespace_request": namespace.pk, "name": "big", "device_class": "gpu.nvidia.com"}
    form = ClaimRequestForm({**data, "count": 1, "purpose": "x" * 2**20}, user=namespace.owner)
    assert not form.is_valid()
    assert form.errors["purpose"] == [
        "Ensure this value has at most 5000 characters (it has 1048576)."
    ]


def test_it_answers_a_1_mb_form_post_with_a_400(alice: User, cluster: Cluster) -> None:
    data = {"cluster": cluster.pk, "name": "big", "purpose": "x" * 2**20}
    response = client_for(alice).post("/namespaces/new/", data)
    assert response.status_code == 400
    assert not NamespaceRequest.objects.exists()
