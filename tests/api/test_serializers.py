"""The claim output built directly answers exactly what DRF's field-by-field walk gives."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework import serializers

from claims.api.serializers import ClaimRequestOutput
from claims.models import ClaimRequest


def generic(claim: ClaimRequest) -> dict:
    output = ClaimRequestOutput(claim)
    return dict(serializers.ModelSerializer.to_representation(output, claim))


def test_it_answers_what_the_fields_say_for_a_pending_claim(claim: ClaimRequest) -> None:
    assert ClaimRequestOutput(claim).data == generic(claim)
    assert ClaimRequestOutput(claim).data["feasibility"] is not None


def test_it_answers_what_the_fields_say_for_a_decided_claim(
    claim: ClaimRequest, carol: User
) -> None:
    claim.state = "in_use"
    claim.decided_by = carol
    claim.decided_at = timezone.now()
    claim.applied_at = timezone.now()
    claim.allocation = {"node": "gpu-node-1", "devices": [], "reserved_for": []}
    claim.save()
    claim = ClaimRequest.objects.get(pk=claim.pk)
    data = ClaimRequestOutput(claim).data
    assert data == generic(claim)
    assert data["decided_by"] == "carol" and data["decided_at"].endswith("Z")
    assert list(data) == list(ClaimRequestOutput.Meta.fields)
