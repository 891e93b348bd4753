"""State changes the cluster reports about runs: pod phases, bounded logs, parsed results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import override_settings

from claims.domain import run_observations
from claims.models import AuditEvent, ClaimRequest, VerificationRun

REAL_OUTPUT = Path(__file__).resolve().parents[2] / "fixtures" / "real-gpu-output"
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def run(claim: ClaimRequest) -> VerificationRun:
    return VerificationRun.objects.create(
        claim=claim, owner=claim.owner, pod_name="train-verify-1", state="running"
    )


def lines(*texts: str, start: datetime = T0) -> list[tuple[datetime, str]]:
    return [(start + timedelta(seconds=i), text) for i, text in enumerate(texts)]


def test_it_keeps_log_lines_once_across_overlapping_fetches(run: VerificationRun) -> None:
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines("a", "b"))
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines("a", "b", "c"))
    assert run.logs.get(container="ctr0").text == "a\nb\nc\n"


def test_it_keeps_a_line_sharing_the_timestamp_of_the_last_one_read(run: VerificationRun) -> None:
    # b and c were printed in the same instant; c came after the first read. Each read starts
    # at the last timestamp kept (inclusive), as the gateway's reads do.
    t1, t2 = T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)
    append = run_observations.run_logs_appended
    append(run=run, container="ctr0", lines=[(T0, "a"), (t1, "b")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c")])
    append(run=run, container="ctr0", lines=[(t1, "b"), (t1, "c"), (t2, "d")])
    assert run.logs.get(container="ctr0").text == "a\nb\nc\nd\n"


@override_settings(RUN_LOG_MAX_BYTES=100)
def test_it_keeps_only_the_tail_of_a_long_log(run: VerificationRun) -> None:
    texts = [f"line {i:03}" for i in range(50)]
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines(*texts))
    log = run.logs.get(container="ctr0")
    assert log.truncated
    assert len(log.text.encode()) <= 100
    assert log.text.endswith("line 049\n")
    assert log.text.startswith("line ")  # never half a line
    assert log.last_timestamp == T0 + timedelta(seconds=49)


def test_it_parses_the_real_h200_output_when_the_pod_succeeds(run: VerificationRun) -> None:
    vector_add = (REAL_OUTPUT / "vectorAdd-H200.txt").read_text().splitlines()
    device_query = (REAL_OUTPUT / "deviceQuery-H200.txt").read_text().splitlines()
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines(*vector_add))
    run_observations.run_logs_appended(run=run, container="ctr1", lines=lines(*device_query))
    assert run_observations.run_finished(run=run, phase="Succeeded")
    run.refresh_from_db()
    assert (run.state, run.passed) == ("succeeded", True)
    assert "H200" in run.device_name
    assert run.compute_capability == "9.0"
    assert run.memory_mib and run.memory_mib > 140_000
    assert run.finished_at is not None


def test_it_fails_a_run_whose_samples_did_not_pass(run: VerificationRun) -> None:
    run_observations.run_logs_appended(run=run, container="ctr0", lines=lines("Test FAILED"))
    run_observations.run_finished(run=run, phase="Failed", message="ctr0 exited with 1 (Error).")
    run.refresh_from_db()
    assert (run.state, run.passed) == ("failed", False)
    assert run.state_message == "ctr0 exited with 1 (Error)."


def test_it_does_not_finish_a_run_twice(run: VerificationRun) -> None:
    assert run_observations.run_finished(run=run, phase="Succeeded")
    assert not run_observations.run_finished(run=run, phase="Failed")
    assert VerificationRun.objects.get().state == "succeeded"


def test_it_shows_the_schedulers_words_while_pending(run: VerificationRun) -> None:
    VerificationRun.objects.filter(pk=run.pk).update(state="pending")
    run.refresh_from_db()
    message = "0/2 nodes are available: 2 cannot allocate all claims."
    run_observations.run_pod_observed(run=run, phase="Pending", message=message)
    run_observations.run_pod_observed(run=run, phase="Pending", message=message)
    run.refresh_from_db()
    assert run.state_message == message
    assert AuditEvent.objects.filter(message=message).count() == 1
