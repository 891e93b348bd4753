"""Idle reclaim by a team's policy, on kubesim with a real Prometheus scraping its
dcgm-exporters: a claim held by an idle Pod is warned with the figures, then released after
the grace period; never for lack of metrics; not once an approver granted an extension."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kubernetes import client

from claims.domain import expiry, idle_reclaim
from claims.models import AuditEvent, ClaimRequest, IdleWarning, Team, TeamMembership
from claims.notify import notifications
from claims.read import idle_claims, utilisation
from tests.claims.read.test_utilisation import LONG_RUN, claim_row
from tests.fixtures.kubesim import api_client, create_namespace, wait_until
from tests.kubesim.test_dcgm_exporter import TRAIN_IMAGE, hold_on_gpu, run_on_gpu


@pytest.fixture
def on_gpu(kubesim_with_prometheus) -> Iterator[Callable[[str, str], str]]:
    """Runs a Pod on a GPU of gpu-node-1 in a new namespace; gives the GPU back after."""
    handle = kubesim_with_prometheus[0]
    started: list[str] = []

    def run(name: str, load: str) -> str:
        namespace = create_namespace(handle)
        run_on_gpu(handle, namespace, name, TRAIN_IMAGE, [*LONG_RUN, "--load", load])
        started.append(namespace)
        return namespace

    yield run
    core = client.CoreV1Api(api_client(handle))
    for namespace in started:
        for pod in core.list_namespaced_pod(namespace).items:
            core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)


@pytest.fixture
def policy(alice: User) -> Team:
    """alice's team reclaims claims idle (activity ≤ 0.1) for a minute, after an hour."""
    team = Team.objects.create(
        name="vision",
        idle_reclaim=True,
        idle_threshold=0.1,
        idle_window=timedelta(minutes=1),
        idle_grace=timedelta(hours=1),
    )
    TeamMembership.objects.create(team=team, user=alice)
    return team


def idle_claim(on_gpu: Callable[[str, str], str], alice: User) -> ClaimRequest:
    """A claim (made five minutes ago) whose Pod has kept its GPU idle."""
    namespace = on_gpu("train", "0")
    claim = claim_row(alice, namespace, "train")
    claim.lifetime, claim.expires_at = timedelta(days=1), timezone.now() + timedelta(days=1)
    claim.save(update_fields=["lifetime", "expires_at"])
    return claim


def warned(claim: ClaimRequest) -> IdleWarning:
    """Once Prometheus has the idle Pod's samples, the check warns."""
    wait_until(lambda: claim.pk in idle_reclaim.check_idle_claims().warned, timeout=90)
    return IdleWarning.objects.get(claim=claim, state="open")


def notices(callbacks: list[Any]) -> list[notifications.Notice]:
    return [c for c in callbacks if isinstance(c, notifications.Notice)]


def test_it_warns_the_owner_of_an_idle_claim_then_releases_it(
    kubesim_with_prometheus,
    on_gpu,
    alice: User,
    policy: Team,
    settings,
    django_capture_on_commit_callbacks,
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    claim = idle_claim(on_gpu, alice)

    with django_capture_on_commit_callbacks() as callbacks:
        warning = warned(claim)
    assert warning.peak_activity == pytest.approx(0.0) and warning.threshold == 0.1
    assert warning.deadline == warning.created + timedelta(hours=1)
    assert warning.idle_since <= claim.applied_at + timedelta(seconds=1)
    [notice] = notices(callbacks)
    assert notice.event == "idle_warning"
    assert "GPU activity at most 0.00" in notice.message and "0.10 for 1 min" in notice.message
    notice.deliver()
    [email] = mail.outbox
    assert email.subject == "Your claim train is idle and will be released"
    assert "will be released at" in email.body
    assert AuditEvent.objects.filter(object_id=claim.pk, action="idle_warning").exists()

    # Within the grace period: warned once, nothing released.
    again = idle_reclaim.check_idle_claims()
    assert claim.pk not in again.warned and claim.pk not in again.reclaimed
    claim.refresh_from_db()
    assert claim.state == "in_use"

    after = warning.deadline + timedelta(seconds=1)
    with django_capture_on_commit_callbacks() as callbacks:
        assert idle_reclaim.check_idle_claims(now=after).reclaimed == [claim.pk]
    assert idle_reclaim.check_idle_claims(now=after).reclaimed == []
    claim.refresh_from_db()
    assert claim.state == "released"
    assert claim.state_message.startswith("Idle since") and "reclaimed by the portal" in (
        claim.state_message
    )
    released = AuditEvent.objects.get(object_id=claim.pk, to_state="released")
    assert released.actor is None
    assert [n.event for n in notices(callbacks)] == ["idle_reclaimed"]
    warning.refresh_from_db()
    assert warning.state == "reclaimed"


def test_a_claim_held_with_nothing_running_on_it_is_warned_and_listed_idle(
    kubesim_with_prometheus, alice: User, carol: User, policy: Team, settings
) -> None:
    handle = kubesim_with_prometheus[0]
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    namespace = create_namespace(handle)
    try:
        claim = claim_row(alice, namespace, "held", hold_on_gpu(handle, namespace, "held"))
        warning = warned(claim)
        assert warning.peak_activity == pytest.approx(0.0)
        assert warning.idle_since >= claim.allocated_at - timedelta(seconds=1)
        rows, no_data = idle_claims.claims_idle_first(carol)
        (row,) = [row for row in rows if row.claim.pk == claim.pk]
        assert no_data == "" and row.activity == 0 and row.warning == warning
    finally:
        client.CoreV1Api(api_client(handle)).delete_namespaced_pod(
            "held", namespace, grace_period_seconds=0
        )


def test_a_claim_without_metrics_is_never_reclaimed(
    kubesim_with_prometheus, alice: User, policy: Team, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    claim = claim_row(alice, "nothing-runs-here", "quiet")  # no Pod: no metrics of it
    outcome = idle_reclaim.check_idle_claims()
    assert outcome.warned == [] and "no metrics of this claim" in outcome.no_data[claim.pk]

    # A warning given while it had metrics is cleared, not carried out, once they are gone.
    IdleWarning.objects.create(
        claim=claim,
        deadline=timezone.now(),
        idle_since=claim.applied_at,
        threshold=0.1,
        window=timedelta(minutes=1),
    )
    outcome = idle_reclaim.check_idle_claims(now=timezone.now() + timedelta(days=1))
    assert outcome.reclaimed == [] and outcome.cleared == [claim.pk]
    claim.refresh_from_db()
    assert claim.state == "in_use"
    warning = IdleWarning.objects.get(claim=claim)
    assert warning.state == "no_data" and "no metrics of this claim" in warning.resolution


def test_an_approved_extension_saves_an_idle_claim(
    kubesim_with_prometheus, on_gpu, alice: User, carol: User, policy: Team, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    claim = idle_claim(on_gpu, alice)
    warning = warned(claim)

    extension = expiry.extension_request(user=alice, claim_request=claim, hours=2, reason="eval")
    expiry.extension_approve(user=carol, extension=extension)
    outcome = idle_reclaim.check_idle_claims(now=warning.deadline + timedelta(seconds=1))
    assert outcome.reclaimed == [] and claim.pk in outcome.cleared
    claim.refresh_from_db()
    assert claim.state == "in_use"
    warning.refresh_from_db()
    assert warning.state == "extended"


def test_a_team_without_the_policy_is_left_alone(
    kubesim_with_prometheus, on_gpu, alice: User, policy: Team, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    policy.idle_reclaim = False
    policy.save()
    claim = idle_claim(on_gpu, alice)
    outcome = idle_reclaim.check_idle_claims()
    assert claim.pk not in outcome.warned and claim.pk not in outcome.no_data


def test_the_claim_page_draws_activity_and_memory_and_the_warning(
    kubesim_with_prometheus, on_gpu, alice: User, policy: Team, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    namespace = on_gpu("train", "0.6")
    claim = claim_row(alice, namespace, "train")
    usage = wait_until(
        lambda: (u := utilisation.claim_usage(claim)).points and u.memory_points and u,
        timeout=90,
    )
    chart = utilisation.chart(usage)
    assert chart is not None and chart.peak_activity == pytest.approx(0.6)
    assert chart.peak_memory_mib > 40_000
    IdleWarning.objects.create(
        claim=claim,
        deadline=timezone.now() + timedelta(hours=3),
        idle_since=claim.applied_at,
        threshold=0.1,
        window=timedelta(minutes=1),
    )
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("claim", args=[claim.pk])).content.decode()
    assert '<svg role="img"' in page and page.count("<polyline") == 2
    assert "GPU activity and memory over the claim's life" in page
    assert "activity (solid line, 0-1) peaked at 0.6" in page
    assert 'id="idle-warning"' in page and "will be released at" in page


def test_approvers_see_the_claims_in_use_idle_first(
    kubesim_with_prometheus, on_gpu, alice: User, carol: User, policy: Team, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    busy_ns = on_gpu("busy", "0.7")
    busy = claim_row(alice, busy_ns, "busy")
    quiet = idle_claim(on_gpu, alice)
    silent = claim_row(alice, "nothing-runs-here", "silent")

    def ordered() -> list[int] | None:
        rows, no_data = idle_claims.claims_idle_first(carol)
        assert no_data == ""
        mine = [row for row in rows if row.claim.pk in (busy.pk, quiet.pk, silent.pk)]
        known = all(row.activity is not None for row in mine if row.claim.pk != silent.pk)
        return [row.claim.pk for row in mine] if known else None

    assert wait_until(ordered, timeout=90) == [quiet.pk, busy.pk, silent.pk]
    client = Client()
    client.force_login(carol)
    page = client.get(reverse("idle-claims")).content.decode()
    assert page.index(f'id="idle-claim-{quiet.pk}"') < page.index(f'id="idle-claim-{busy.pk}"')
    client.force_login(alice)
    assert client.get(reverse("idle-claims")).status_code == 403
