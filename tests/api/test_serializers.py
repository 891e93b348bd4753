"""The outputs built directly answer exactly what DRF's field-by-field walk gives."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework import serializers

from claims.api.serializers import (
    ClaimRequestOutput,
    NamespaceRequestOutput,
    VerificationRunOutput,
    claims_page_context,
)
from claims.models import ClaimRequest, NamespaceRequest, RunLog, VerificationRun
from claims.read import selectors


def generic(claim: ClaimRequest) -> dict:
    output = ClaimRequestOutput(claim)
    return dict(serializers.ModelSerializer.to_representation(output, claim))


def walked(output: serializers.ModelSerializer, obj: object) -> dict:
    return dict(serializers.ModelSerializer.to_representation(output, obj))


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


def test_a_listed_claim_is_what_the_fields_say(claim: ClaimRequest, carol: User) -> None:
    """A page of the list reads the names as columns of the claim's row (no related rows):
    the answer is still DRF's walk over the claim with its related rows."""
    decided = ClaimRequest.objects.get(pk=claim.pk)
    decided.pk, decided.name, decided.state, decided.decided_by = None, "decided", "in_use", carol
    decided.decided_at = timezone.now()
    decided.save()
    rows = list(selectors.claim_request_api_rows(user=carol).order_by("pk"))
    context = claims_page_context(rows)
    for row in rows:
        whole = ClaimRequest.objects.get(pk=row.pk)
        assert ClaimRequestOutput(row, context=context).data == generic(whole)
    assert [row.state for row in rows] == ["pending", "in_use"]


def test_a_namespace_request_is_what_the_fields_say(claim: ClaimRequest, carol: User) -> None:
    ns = claim.namespace_request
    for change in ({}, {"decided_by": carol, "decided_at": timezone.now(), "state": "active"}):
        NamespaceRequest.objects.filter(pk=ns.pk).update(access_granted_at=timezone.now(), **change)
        ns = NamespaceRequest.objects.get(pk=ns.pk)
        data = NamespaceRequestOutput(ns).data
        assert data == walked(NamespaceRequestOutput(ns), ns)
        assert list(data) == list(NamespaceRequestOutput.Meta.fields)


def test_a_run_is_what_the_fields_say(claim: ClaimRequest, alice: User) -> None:
    run = VerificationRun.objects.create(claim=claim, owner=alice, pod_name="pod1-1")
    for getter in (selectors.verification_run_get, selectors.verification_run_api_get):
        fresh = getter(user=alice, pk=run.pk)
        assert VerificationRunOutput(fresh).data == walked(VerificationRunOutput(fresh), fresh)
    VerificationRun.objects.filter(pk=run.pk).update(
        state="succeeded",
        node="gpu-node-1",
        devices=[{"name": "gpu-0", "pool": "gpu-node-1", "uuid": "GPU-1"}],
        passed=True,
        vector_add_passed=True,
        device_query_passed=False,
        device_name="NVIDIA H200",
        compute_capability="9.0",
        memory_mib=143771,
        started_at=timezone.now(),
        finished_at=timezone.now(),
        pod_warnings=[
            {"reason": "Failed", "message": "pull", "at": "2026-12-02T00:00:00Z", "count": 2}
        ],
    )
    RunLog.objects.create(run=run, container="ctr0", text="Test PASSED\n", truncated=True)
    for getter in (selectors.verification_run_get, selectors.verification_run_api_get):
        fresh = getter(user=alice, pk=run.pk)
        data = VerificationRunOutput(fresh).data
        assert data == walked(VerificationRunOutput(fresh), fresh)
        assert list(data) == list(VerificationRunOutput.Meta.fields)
        assert data["logs"][0] == {
            "container": "ctr0",
            "url": f"/api/v1/runs/{run.pk}/logs/ctr0/",
            "length": len("Test PASSED\n"),
            "truncated": True,
        }
