"""State changes the cluster reports about namespaces and claims: allocation, refusals."""

from __future__ import annotations

from django.utils import timezone

from claims.domain import observations
from claims.models import AuditEvent, ClaimRequest, NamespaceRequest

ALLOCATION = {
    "node": "gpu-node-1",
    "devices": [
        {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "gpu-node-1",
            "device": "gpu-0",
            "attributes": {},
            "capacity": {},
        }
    ],
    "reserved_for": ["train-verify-1"],
}


def test_it_marks_a_claim_in_use_while_allocated_and_says_so_when_not(claim: ClaimRequest) -> None:
    assert observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
    claim.refresh_from_db()
    assert (claim.state, claim.node) == ("in_use", "gpu-node-1")
    assert claim.state_message == "Allocated gpu-0 on gpu-node-1."
    assert observations.claim_allocation_seen(claim_request=claim, allocation=None)
    claim.refresh_from_db()
    assert (claim.state, claim.allocation, claim.node) == ("waiting", None, "")
    assert "holds no GPU" in claim.state_message


def test_it_keeps_since_when_the_claim_holds_its_devices(claim: ClaimRequest) -> None:
    before = timezone.now()
    observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
    claim.refresh_from_db()
    first = claim.allocated_at
    assert first is not None and first >= before
    # The same devices seen again (reservedFor changed): the same span.
    observations.claim_allocation_seen(
        claim_request=claim, allocation={**ALLOCATION, "reserved_for": ["other"]}
    )
    claim.refresh_from_db()
    assert claim.allocated_at == first
    # Other devices: a new span.
    other = {**ALLOCATION, "devices": [{**ALLOCATION["devices"][0], "device": "gpu-1"}]}
    observations.claim_allocation_seen(claim_request=claim, allocation=other)
    claim.refresh_from_db()
    assert claim.allocated_at is not None and claim.allocated_at > first
    observations.claim_allocation_seen(claim_request=claim, allocation=None)
    claim.refresh_from_db()
    assert claim.allocated_at is None


def test_it_writes_one_event_however_often_the_same_allocation_is_seen(
    claim: ClaimRequest,
) -> None:
    for _ in range(3):
        observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
    assert AuditEvent.objects.filter(to_state="in_use").count() == 1


def test_it_fails_the_claims_waiting_on_a_refused_namespace(claim: ClaimRequest) -> None:
    ns = claim.namespace_request
    NamespaceRequest.objects.filter(pk=ns.pk).update(state="approved")
    ClaimRequest.objects.filter(pk=claim.pk).update(state="approved")
    ns.refresh_from_db()
    observations.namespace_failed(namespace_request=ns, message="namespaces is forbidden")
    claim.refresh_from_db()
    assert claim.state == "failed"
    assert claim.state_message == "Namespace team-a: namespaces is forbidden"
