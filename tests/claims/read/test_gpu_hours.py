"""GPU-hours per team and user for a month: held device-hours from the claims' state changes
(allocation to release, clipped to the month), busy hours from a real Prometheus or "no
data", the CSV export, and who sees whose."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from claims.models import AuditEvent, ClaimRequest, Team, TeamMembership
from claims.read import gpu_hours
from tests.claims.read.test_utilisation import LONG_RUN, claim_row
from tests.fixtures.kubesim import create_namespace, wait_until
from tests.kubesim.test_dcgm_exporter import TRAIN_IMAGE, run_on_gpu

MARCH = datetime(2026, 3, 1, tzinfo=UTC)
LATER = datetime(2026, 4, 15, tzinfo=UTC)
TWO_GPUS = {"node": "gpu-node-1", "devices": [{"device": "gpu-0"}, {"device": "gpu-1"}]}


def changed(claim: ClaimRequest, to_state: str, at: datetime, allocation: dict | None = None):
    AuditEvent.objects.create(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST,
        object_id=claim.pk,
        object_name=claim.name,
        to_state=to_state,
        allocation=allocation,
        created=at,
    )


@pytest.fixture
def month_of_use(alice: User, bob: User) -> None:
    """alice (vision) held 2 GPUs for 10 h on 2 March (a Pod ending between); bob (speech)
    held one from 28 February noon to 1 March 06:00: 6 h of it in March."""
    for name, user in (("vision", alice), ("speech", bob)):
        TeamMembership.objects.create(team=Team.objects.create(name=name), user=user)
    train = claim_row(alice, "vision-ns", "train")
    changed(train, "waiting", MARCH + timedelta(days=1) - timedelta(minutes=5))
    changed(train, "in_use", MARCH + timedelta(days=1), TWO_GPUS)
    changed(train, "waiting", MARCH + timedelta(days=1, hours=4))
    changed(train, "in_use", MARCH + timedelta(days=1, hours=5), TWO_GPUS)
    changed(train, "released", MARCH + timedelta(days=1, hours=10))
    night = claim_row(bob, "speech-ns", "night")
    changed(night, "in_use", MARCH - timedelta(hours=12), {"devices": [{"device": "gpu-0"}]})
    changed(night, "released", MARCH + timedelta(hours=6))
    never = claim_row(bob, "speech-ns2", "never")  # approved, never allocated
    changed(never, "waiting", MARCH + timedelta(days=3))


def test_it_counts_held_hours_per_user_and_team_within_the_month(
    month_of_use: None, carol: User, settings
) -> None:
    settings.PROMETHEUS_URL = ""
    report = gpu_hours.gpu_hours(carol, "2026-03", now=LATER)
    assert [(line.team, line.user, line.claims, line.held_hours) for line in report.users] == [
        ("speech", "bob", 1, pytest.approx(6.0)),
        ("vision", "alice", 1, pytest.approx(20.0)),
    ]
    assert [(line.team, line.held_hours) for line in report.teams] == [
        ("speech", pytest.approx(6.0)),
        ("vision", pytest.approx(20.0)),
    ]
    assert all(line.busy_hours is None for line in report.users)
    assert "PROMETHEUS_URL is not set" in report.no_data
    february = gpu_hours.gpu_hours(carol, "2026-02", now=LATER)
    assert [(line.user, line.held_hours) for line in february.users] == [
        ("bob", pytest.approx(12.0))
    ]


def test_a_member_sees_only_their_team(month_of_use: None, alice: User, settings) -> None:
    settings.PROMETHEUS_URL = ""
    report = gpu_hours.gpu_hours(alice, "2026-03", now=LATER)
    assert [line.user for line in report.users] == ["alice"]


def test_the_page_and_its_csv(month_of_use: None, carol: User, settings) -> None:
    settings.PROMETHEUS_URL = ""
    client = Client()
    client.force_login(carol)
    page = client.get(reverse("gpu-hours"), {"month": "2026-03"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "20.00" in text and 'id="busy-no-data"' in text and "GPU-hours in 2026-03" in text
    exported = client.get(reverse("gpu-hours"), {"month": "2026-03", "format": "csv"})
    assert exported["Content-Disposition"] == 'attachment; filename="gpu-hours-2026-03.csv"'
    rows = list(csv.reader(io.StringIO(exported.content.decode())))
    assert rows == [
        ["month", "team", "user", "claims", "held_gpu_hours", "busy_gpu_hours"],
        ["2026-03", "speech", "bob", "1", "6.000", ""],
        ["2026-03", "vision", "alice", "1", "20.000", ""],
    ]
    bad = client.get(reverse("gpu-hours"), {"month": "March"})
    assert bad.status_code == 400 and "YYYY-MM" in bad.content.decode()


def test_busy_hours_come_from_prometheus(
    kubesim_with_prometheus, alice: User, carol: User, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    handle = kubesim_with_prometheus[0]
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "1"])
    claim = claim_row(alice, namespace, "train")
    changed(claim, "in_use", timezone.now() - timedelta(seconds=1), {"devices": [{}]})

    def busy() -> gpu_hours.Line | None:
        report = gpu_hours.gpu_hours(carol, None, resolution=1)
        line = report.users[0]
        return line if line.busy_hours and line.busy_hours > 2 / 3600 else None

    line = wait_until(busy, timeout=90)
    assert line.busy_hours is not None and 0 < line.busy_hours <= line.held_hours
