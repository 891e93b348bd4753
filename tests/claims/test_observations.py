"""State changes the cluster reports: allocation, pod phases, bounded logs, parsed results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from claims import observations
from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest, VerificationRun

REAL_OUTPUT = Path(__file__).resolve().parents[1] / "fixtures" / "real-gpu-output"
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def claim(alice: User, db: None) -> ClaimRequest:
    cluster = Cluster.objects.create(name="lab")
    ns = NamespaceRequest.objects.create(
        owner=alice, cluster=cluster, name="team-a", state="active"
    )
    return ClaimRequest.objects.create(
        owner=alice,
        namespace_request=ns,
        name="train",
        device_class="gpu.nvidia.com",
        count=1,
        state="waiting",
    )


@pytest.fixture
def run(claim: ClaimRequest) -> VerificationRun:
    return VerificationRun.objects.create(
        claim=claim, owner=claim.owner, pod_name="train-verify-1", state="running"
    )


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


def lines(*texts: str, start: datetime = T0) -> list[tuple[datetime, str]]:
    return [(start + timedelta(seconds=i), text) for i, text in enumerate(texts)]


def test_it_marks_a_claim_in_use_while_allocated_and_says_so_when_not(claim: ClaimRequest) -> None:
    assert observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
    claim.refresh_from_db()
    assert (claim.state, claim.node) == ("in_use", "gpu-node-1")
    assert claim.state_message == "Allocated gpu-0 on gpu-node-1."
    assert observations.claim_allocation_seen(claim_request=claim, allocation=None)
    claim.refresh_from_db()
    assert (claim.state, claim.allocation, claim.node) == ("waiting", None, "")
    assert "holds no GPU" in claim.state_message


def test_it_writes_one_event_however_often_the_same_allocation_is_seen(
    claim: ClaimRequest,
) -> None:
    for _ in range(3):
        observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
    assert AuditEvent.objects.filter(to_state="in_use").count() == 1


def test_it_keeps_log_lines_once_across_overlapping_fetches(run: VerificationRun) -> None:
    observations.run_logs_appended(run=run, container="ctr0", lines=lines("a", "b"))
    observations.run_logs_appended(run=run, container="ctr0", lines=lines("a", "b", "c"))
    assert run.logs.get(container="ctr0").text == "a\nb\nc\n"


def test_it_keeps_a_line_sharing_the_timestamp_of_the_last_one_read(run: VerificationRun) -> None:
    # b and c were printed in the same instant; c came after the first read. Each read starts
    # at the last timestamp kept (inclusive), as the gateway's reads do.
    t1, t2 = T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)
    append = observations.run_logs_appended
    append(run=run, container="ctr0", lines=[(T0, "a"), (t1, "b")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c"), (t2, "d")])
    assert run.logs.get(container="ctr0").text == "a\nb\nc\nd\n"


@override_settings(RUN_LOG_MAX_BYTES=100)
def test_it_keeps_only_the_tail_of_a_long_log(run: VerificationRun) -> None:
    texts = [f"line {i:03}" for i in range(50)]
    observations.run_logs_appended(run=run, container="ctr0", lines=lines(*texts))
    log = run.logs.get(container="ctr0")
    assert log.truncated
    assert len(log.text.encode()) <= 100
    assert log.text.endswith("line 049\n")
    assert log.text.startswith("line ")  # never half a line
    assert log.last_timestamp == T0 + timedelta(seconds=49)


def test_it_parses_the_real_h200_output_when_the_pod_succeeds(run: VerificationRun) -> None:
    vector_add = (REAL_OUTPUT / "vectorAdd-H200.txt").read_text().splitlines()
    device_query = (REAL_OUTPUT / "deviceQuery-H200.txt").read_text().splitlines()
    observations.run_logs_appended(run=run, container="ctr0", lines=lines(*vector_add))
    observations.run_logs_appended(run=run, container="ctr1", lines=lines(*device_query))
    assert observations.run_finished(run=run, phase="Succeeded")
    run.refresh_from_db()
    assert (run.state, run.passed) == ("succeeded", True)
    assert "H200" in run.device_name
    assert run.compute_capability == "9.0"
    assert run.memory_mib and run.memory_mib > 140_000
    assert run.finished_at is not None


def test_it_fails_a_run_whose_samples_did_not_pass(run: VerificationRun) -> None:
    observations.run_logs_appended(run=run, container="ctr0", lines=lines("Test FAILED"))
    observations.run_finished(run=run, phase="Failed", message="ctr0 exited with 1 (Error).")
    run.refresh_from_db()
    assert (run.state, run.passed) == ("failed", False)
    assert run.state_message == "ctr0 exited with 1 (Error)."


def test_it_does_not_finish_a_run_twice(run: VerificationRun) -> None:
    assert observations.run_finished(run=run, phase="Succeeded")
    assert not observations.run_finished(run=run, phase="Failed")
    assert VerificationRun.objects.get().state == "succeeded"


def test_it_shows_the_schedulers_words_while_pending(run: VerificationRun) -> None:
    VerificationRun.objects.filter(pk=run.pk).update(state="pending")
    run.refresh_from_db()
    message = "0/2 nodes are available: 2 cannot allocate all claims."
    observations.run_pod_observed(run=run, phase="Pending", message=message)
    observations.run_pod_observed(run=run, phase="Pending", message=message)
    run.refresh_from_db()
    assert run.state_message == message
    assert AuditEvent.objects.filter(message=message).count() == 1


def test_it_fails_the_claims_waiting_on_a_refused_namespace(claim: ClaimRequest) -> None:
    ns = claim.namespace_request
    NamespaceRequest.objects.filter(pk=ns.pk).update(state="approved")
    ClaimRequest.objects.filter(pk=claim.pk).update(state="approved")
    ns.refresh_from_db()
    observations.namespace_failed(namespace_request=ns, message="namespaces is forbidden")
    claim.refresh_from_db()
    assert claim.state == "failed"
    assert claim.state_message == "Namespace team-a: namespaces is forbidden"
