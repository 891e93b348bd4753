"""A claim's lifetime, with a frozen clock: it starts in the cluster, the owner is reminded
once, the portal reclaims it at the end (kubesim loses the claim and its Pods), and the owner
can ask for more time."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import escape

import kubesim
from claims.domain import expiry, services
from claims.kube.gateway import TransientKubeError
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimExtension,
    ClaimRequest,
    Cluster,
    Profile,
    Team,
    TeamMembership,
    TeamQuota,
)
from claims.notify import notifications
from claims.templatetags.portal import user_message
from claims.worker import cluster_steps
from portal.celery import app as celery_app
from tests.api.conftest import token_client
from tests.fixtures.portal import PASSWORD, make_user, pods_in, wait_until

pytestmark = pytest.mark.django_db
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def approved_claim(owner: User, approver: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=owner, cluster=cluster, name=f"exp-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=owner, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    services.claim_request_approve(user=approver, claim_request=claim)
    claim.refresh_from_db()
    return claim


def applied_claim(owner: User, approver: User, cluster: Cluster) -> ClaimRequest:
    """A claim created in kubesim at START (the clock frozen while it is)."""
    claim = approved_claim(owner, approver, cluster)
    with time_machine.travel(START, tick=False):
        cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    return claim


def notices(callbacks: list[Callable[[], Any]]) -> list[notifications.Notice]:
    return [c for c in callbacks if isinstance(c, notifications.Notice)]


def team_of(user: User, **quota: Any) -> Team:
    team = Team.objects.create(name=f"team-{uuid.uuid4().hex[:6]}")
    TeamMembership.objects.create(team=team, user=user)
    if quota:
        cluster = quota.pop("cluster")
        TeamQuota.objects.create(team=team, cluster=cluster, device_class="gpu.nvidia.com", **quota)
    return team


def test_it_starts_the_lifetime_when_the_claim_is_created_in_the_cluster(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = approved_claim(alice, carol, cluster)
    assert claim.expires_at is None  # approval alone holds nothing in the cluster
    with time_machine.travel(START, tick=False):
        cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.state == "waiting"
    assert claim.lifetime == settings.CLAIM_DEFAULT_LIFETIME
    assert claim.expires_at == START + settings.CLAIM_DEFAULT_LIFETIME


def test_it_takes_the_teams_default_capped_by_its_max_lifetime(
    alice: User, carol: User, cluster: Cluster
) -> None:
    team_of(
        alice, cluster=cluster, default_lifetime=timedelta(days=9), max_lifetime=timedelta(hours=5)
    )
    claim = applied_claim(alice, carol, cluster)
    assert claim.lifetime == timedelta(hours=5)
    assert claim.expires_at == START + timedelta(hours=5)


def test_it_keeps_the_end_when_a_drifted_claim_is_applied_again(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    ClaimRequest.objects.filter(pk=claim.pk).update(state="approved")
    claim.refresh_from_db()
    with time_machine.travel(START + timedelta(days=2), tick=False):
        cluster_steps.apply_claim(claim)
    claim.refresh_from_db()
    assert claim.expires_at == START + settings.CLAIM_DEFAULT_LIFETIME


def test_it_reminds_the_owner_once_before_the_end(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    claim = applied_claim(alice, carol, cluster)
    end = START + settings.CLAIM_DEFAULT_LIFETIME
    # A week's lifetime: reminded 10% of it (16.8 h) before the end, as that is under 24 h.
    with time_machine.travel(end - timedelta(hours=17), tick=False):
        assert expiry.send_reminders() == []
    with django_capture_on_commit_callbacks() as callbacks:
        with time_machine.travel(end - timedelta(hours=16), tick=False):
            assert expiry.send_reminders() == [claim.pk]
            assert expiry.send_reminders() == []
        with time_machine.travel(end - timedelta(hours=1), tick=False):
            assert expiry.send_reminders() == []
    [notice] = notices(callbacks)
    assert (notice.event, notice.pk) == ("expiry_reminder", claim.pk)
    notice.deliver()
    [email] = mail.outbox
    assert email.to == ["alice@example.org"]
    assert email.subject == "Your claim train expires soon"
    assert "expires at March 9, 2026, 9 a.m. UTC" in email.body
    assert f"/claims/{claim.pk}/" in email.body


def test_it_reclaims_the_claim_and_its_pods_at_the_end(
    alice: User,
    carol: User,
    cluster: Cluster,
    kubesim_cluster: kubesim.Handle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    claim = applied_claim(alice, carol, cluster)
    run = services.verification_run_start(user=alice, claim_request=claim)
    cluster_steps.start_run(run)
    assert pods_in(kubesim_cluster, claim.namespace) == [run.pod_name]
    end = START + settings.CLAIM_DEFAULT_LIFETIME

    with time_machine.travel(end - timedelta(seconds=1), tick=False):
        assert expiry.reclaim_expired() == []
    with django_capture_on_commit_callbacks() as callbacks, time_machine.travel(end, tick=False):
        assert expiry.reclaim_expired() == [claim.pk]
        assert expiry.reclaim_expired() == []

    claim.refresh_from_db()
    assert claim.state == "released"
    assert (
        claim.state_message
        == "Expired: its lifetime ended at 2026-03-09 09:00 UTC; reclaimed by the portal."
    )
    expired = AuditEvent.objects.get(
        object_id=claim.pk, object_kind="claim_request", to_state="released"
    )
    assert expired.actor is None and expired.message.startswith("Expired")
    run.refresh_from_db()
    assert run.state in ("failed", "succeeded")
    [notice] = notices(callbacks)
    assert notice.event == "reclaimed"
    # What the delete_claim task does once the release commits.
    wait_until(lambda: settles(lambda: cluster_steps.delete_claim(claim)), timeout=60)
    assert kubesim_cluster.admin("GET", CLAIMS.format(ns=claim.namespace))["items"] == []
    assert pods_in(kubesim_cluster, claim.namespace) == []
    notice.deliver()
    [email] = mail.outbox
    assert email.subject == "Your claim train expired and was reclaimed"


def settles(step: Callable[[], Any]) -> bool:
    try:
        step()
    except TransientKubeError:
        return False
    return True


def test_it_extends_at_once_when_a_rule_allows_it(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    team = team_of(alice)
    ApprovalRule.objects.create(
        name="a-day-more", applies_to="extension", team=team, max_lifetime=timedelta(days=8)
    )
    claim = applied_claim(alice, carol, cluster)
    ClaimRequest.objects.filter(pk=claim.pk).update(reminded_at=START)
    with django_capture_on_commit_callbacks() as callbacks:
        extension = expiry.extension_request(
            user=alice, claim_request=claim, hours=24, reason="training runs late"
        )
    assert extension.state == "approved"
    assert extension.decision == "Extended automatically by rule 'a-day-more'."
    assert extension.expires_before == START + timedelta(days=7)
    assert extension.expires_after == START + timedelta(days=8)
    claim.refresh_from_db()
    assert claim.expires_at == START + timedelta(days=8)
    assert claim.lifetime == timedelta(days=8)
    assert claim.reminded_at is None  # a new end, a new reminder
    messages = [e.message for e in AuditEvent.objects.filter(object_id=claim.pk)]
    assert "Asked for 24 h more: training runs late." in messages
    assert any(m.startswith("Extended by 24 h, now expires at 2026-03-10 09:00") for m in messages)
    assert [n.event for n in notices(callbacks)] == ["extension_approved"]
    # Past the rule's 8 days: an approver decides.
    assert expiry.extension_request(user=alice, claim_request=claim, hours=1).state == "pending"


def test_an_approver_decides_an_extension_no_rule_allows(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    extension = expiry.extension_request(user=alice, claim_request=claim, hours=48)
    assert extension.state == "pending"
    with pytest.raises(ValidationError, match="already waiting for a decision"):
        expiry.extension_request(user=alice, claim_request=claim, hours=1)
    with pytest.raises(PermissionDenied):
        expiry.extension_approve(user=alice, extension=extension)
    expiry.extension_approve(user=carol, extension=extension)
    claim.refresh_from_db()
    assert claim.expires_at == START + timedelta(days=9)
    assert extension.decided_by == carol
    with pytest.raises(ValidationError, match="already approved"):
        expiry.extension_reject(user=carol, extension=extension, reason="no")

    second = expiry.extension_request(user=alice, claim_request=claim, hours=48)
    with pytest.raises(ValidationError) as refused:
        expiry.extension_reject(user=carol, extension=second, reason="  ")
    assert "reason" in refused.value.message_dict
    expiry.extension_reject(user=carol, extension=second, reason="The pool is short this week.")
    claim.refresh_from_db()
    assert claim.expires_at == START + timedelta(days=9)
    assert ClaimExtension.objects.get(pk=second.pk).state == "rejected"


def test_it_refuses_extensions_that_cannot_be(
    alice: User, bob: User, carol: User, cluster: Cluster
) -> None:
    pending = approved_claim(alice, carol, cluster)
    with pytest.raises(ValidationError, match="only a claim whose lifetime runs"):
        expiry.extension_request(user=alice, claim_request=pending, hours=1)
    claim = applied_claim(alice, carol, cluster)
    for hours in (0, -3, expiry.MAX_EXTENSION_HOURS + 1):
        with pytest.raises(ValidationError) as refused:
            expiry.extension_request(user=alice, claim_request=claim, hours=hours)
        assert "hours" in refused.value.message_dict
    with pytest.raises(PermissionDenied):
        expiry.extension_request(user=bob, claim_request=claim, hours=1)
    assert not ClaimExtension.objects.exists()


def test_an_extension_granted_in_time_keeps_the_claim(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    end = START + settings.CLAIM_DEFAULT_LIFETIME
    with time_machine.travel(end - timedelta(minutes=5), tick=False):
        extension = expiry.extension_request(user=alice, claim_request=claim, hours=2)
        expiry.extension_approve(user=carol, extension=extension)
    with time_machine.travel(end + timedelta(hours=1), tick=False):
        assert expiry.reclaim_expired() == []
    with time_machine.travel(end + timedelta(hours=2), tick=False):
        assert expiry.reclaim_expired() == [claim.pk]


def test_a_reclaim_closes_the_extension_still_waiting(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    extension = expiry.extension_request(user=alice, claim_request=claim, hours=48)
    with time_machine.travel(START + timedelta(days=7), tick=False):
        assert expiry.reclaim_expired() == [claim.pk]
    extension.refresh_from_db()
    assert extension.state == "rejected"
    assert extension.decision == "The claim expired before a decision."
    with pytest.raises(ValidationError, match="only a claim whose lifetime runs"):
        expiry.extension_request(user=alice, claim_request=claim, hours=1)


def client_of(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_claim_page_shows_the_end_and_the_extension_form_checks_its_fields(
    alice: User, bob: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    page = client_of(alice).get(reverse("claim", args=[claim.pk]))
    html = page.content.decode()
    assert '<strong id="claim-expires-at">March 9, 2026, 9 a.m. UTC</strong>' in html
    assert reverse("claim-extend", args=[claim.pk]) in html
    form = client_of(alice).get(reverse("claim-extend", args=[claim.pk])).content.decode()
    assert "(up to 30 days in all)" in form

    refused = client_of(alice).post(reverse("claim-extend", args=[claim.pk]), {"hours": "0"})
    assert refused.status_code == 200
    html = refused.content.decode()
    assert 'class="field has-error" id="field-hours"' in html
    assert not ClaimExtension.objects.exists()

    asked = client_of(alice).post(
        reverse("claim-extend", args=[claim.pk]), {"hours": "12", "reason": "one more epoch"}
    )
    assert asked.status_code == 302
    extension = ClaimExtension.objects.get()
    assert (extension.extra, extension.reason, extension.state) == (
        timedelta(hours=12),
        "one more epoch",
        "pending",
    )
    html = client_of(carol).get(reverse("claim", args=[claim.pk])).content.decode()
    assert reverse("extension-approve", args=[extension.pk]) in html
    assert client_of(bob).get(reverse("claim-extend", args=[claim.pk])).status_code == 404


def test_an_approver_decides_on_the_claim_page(alice: User, carol: User, cluster: Cluster) -> None:
    claim = applied_claim(alice, carol, cluster)
    extension = expiry.extension_request(user=alice, claim_request=claim, hours=6)
    own = client_of(alice).post(reverse("extension-approve", args=[extension.pk]), follow=True)
    assert "Only approvers can approve" in own.content.decode()
    no_reason = client_of(carol).post(reverse("extension-reject", args=[extension.pk]), follow=True)
    assert "Say why" in no_reason.content.decode()
    client_of(carol).post(reverse("extension-approve", args=[extension.pk]))
    claim.refresh_from_db()
    assert claim.expires_at == START + timedelta(days=7, hours=6)


def test_the_api_shows_the_lifetime_and_takes_extensions(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    mine, approver = token_client(alice), token_client(carol)
    shown = mine.get(f"/api/v1/claims/{claim.pk}/").json()
    assert shown["expires_at"] == "2026-03-09T09:00:00Z"
    assert shown["lifetime_seconds"] == 7 * 24 * 3600

    refused = mine.post(f"/api/v1/claims/{claim.pk}/extensions/", {"hours": 0}, format="json")
    assert refused.status_code == 400 and "hours" in refused.json()
    asked = mine.post(
        f"/api/v1/claims/{claim.pk}/extensions/", {"hours": 24, "reason": "late"}, format="json"
    )
    assert asked.status_code == 201
    extension = asked.json()
    assert (extension["state"], extension["hours"], extension["requested_by"]) == (
        "pending",
        24,
        "alice",
    )
    again = mine.post(f"/api/v1/claims/{claim.pk}/extensions/", {"hours": 1}, format="json")
    assert again.status_code == 409
    assert mine.post(f"/api/v1/extensions/{extension['id']}/approve/").status_code == 403
    assert token_client(None).get(f"/api/v1/claims/{claim.pk}/extensions/").status_code == 401

    approved = approver.post(f"/api/v1/extensions/{extension['id']}/approve/")
    assert approved.status_code == 200
    assert approved.json()["decided_by"] == "carol"
    assert approved.json()["expires_after"] == "2026-03-10T09:00:00Z"
    listed = mine.get(f"/api/v1/claims/{claim.pk}/extensions/").json()
    assert [e["state"] for e in listed] == ["approved"]
    assert mine.get(f"/api/v1/claims/{claim.pk}/").json()["expires_at"] == "2026-03-10T09:00:00Z"


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_reclaims_through_the_worker(
    alice: User,
    carol: User,
    cluster: Cluster,
    kubesim_cluster: kubesim.Handle,
    celery_worker_process: Any,
) -> None:
    claim = approved_claim(alice, carol, cluster)
    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).expires_at)
    # Its end has come (the worker has its own clock: the row is moved, not the time).
    ClaimRequest.objects.filter(pk=claim.pk).update(expires_at=timezone.now())
    celery_app.send_task(
        "claims.worker.tasks.expire_claims", queue=settings.CELERY_TASK_DEFAULT_QUEUE
    )

    wait_until(lambda: ClaimRequest.objects.get(pk=claim.pk).cleaned_up_at, timeout=30)
    claim.refresh_from_db()
    assert claim.state == "released" and claim.state_message.startswith("Expired")
    assert kubesim_cluster.admin("GET", CLAIMS.format(ns=claim.namespace))["items"] == []


def test_a_claim_from_before_lifetimes_gets_one_from_now(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    ClaimRequest.objects.filter(pk=claim.pk).update(expires_at=None, lifetime=None)
    later = START + timedelta(days=30)
    with time_machine.travel(later, tick=False):
        assert expiry.start_missing_clocks() == [claim.pk]
        assert expiry.start_missing_clocks() == []
        assert expiry.reclaim_expired() == []
    claim.refresh_from_db()
    assert claim.expires_at == later + settings.CLAIM_DEFAULT_LIFETIME


def test_it_refuses_to_ask_for_time_past_the_max_lifetime(
    alice: User, carol: User, cluster: Cluster
) -> None:
    week, cap = timedelta(days=7), timedelta(days=8)
    team_of(alice, cluster=cluster, default_lifetime=week, max_lifetime=cap)
    claim = applied_claim(alice, carol, cluster)
    with pytest.raises(ValidationError, match="maximum of 192 h: ask for 24 h at most") as refused:
        expiry.extension_request(user=alice, claim_request=claim, hours=48)
    assert "hours" in refused.value.message_dict
    assert not claim.extensions.exists()


def test_it_refuses_an_approvers_grant_past_the_max_lifetime(
    alice: User, carol: User, cluster: Cluster
) -> None:
    week, cap = timedelta(days=7), timedelta(days=9)
    team = team_of(alice, cluster=cluster, default_lifetime=week, max_lifetime=cap)
    claim = applied_claim(alice, carol, cluster)
    assert claim.lifetime == week
    extension = expiry.extension_request(user=alice, claim_request=claim, hours=48)
    assert extension.state == "pending"
    # The admin lowers the cap while the extension waits.
    TeamQuota.objects.filter(team=team).update(max_lifetime=timedelta(days=8))
    with pytest.raises(ValidationError, match="216 h in all, more than its maximum of 192 h"):
        expiry.extension_approve(user=carol, extension=extension)
    extension.refresh_from_db()
    claim.refresh_from_db()
    assert extension.state == "pending"
    assert claim.expires_at == START + timedelta(days=7)
    # Within the cap: granted.
    expiry.extension_reject(user=carol, extension=extension, reason="Too long.")
    within = expiry.extension_request(user=alice, claim_request=claim, hours=24)
    expiry.extension_approve(user=carol, extension=within)
    claim.refresh_from_db()
    assert claim.expires_at == START + timedelta(days=8)


def test_an_approver_does_not_approve_the_time_they_asked_for(
    alice: User, carol: User, cluster: Cluster, settings: Any
) -> None:
    claim = applied_claim(alice, carol, cluster)
    extension = expiry.extension_request(user=carol, claim_request=claim, hours=6)
    assert extension.requested_by == carol
    with pytest.raises(PermissionDenied, match="four-eyes"):
        expiry.extension_approve(user=carol, extension=extension)
    assert ClaimExtension.objects.get(pk=extension.pk).state == "pending"
    expiry.extension_approve(user=make_user("dave", approver=True), extension=extension)
    assert ClaimExtension.objects.get(pk=extension.pk).state == "approved"

    settings.ALLOW_SELF_APPROVAL = True
    again = expiry.extension_request(user=carol, claim_request=claim, hours=6)
    expiry.extension_approve(user=carol, extension=again)
    assert ClaimExtension.objects.get(pk=again.pk).state == "approved"


def hebrew(user: User) -> Client:
    Profile.objects.update_or_create(user=user, defaults={"language": "he"})
    return client_of(user)


def test_the_claim_page_shows_the_end_in_the_readers_date_format(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    english = client_of(carol).get(reverse("claim", args=[claim.pk])).content.decode()
    assert '<strong id="claim-expires-at">March 9, 2026, 9 a.m. UTC</strong>' in english
    try:
        html = hebrew(alice).get(reverse("claim", args=[claim.pk])).content.decode()
    finally:
        translation.deactivate()
    assert '<html lang="he" dir="rtl">' in html
    assert '<strong id="claim-expires-at">9 במרץ 2026 09:00 UTC</strong>' in html
    assert "2026-03-09 09:00" not in html
    assert 'datetime="2026-03-02T09:00:00+00:00"' in html  # the timeline's, still ISO 8601


def test_an_expired_claim_says_so_in_the_readers_language(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    with time_machine.travel(START + timedelta(days=7), tick=False):
        assert expiry.reclaim_expired() == [claim.pk]
    claim.refresh_from_db()
    # The row and its audit trail keep the English, with a UTC time any tool can read.
    stored = "Expired: its lifetime ended at 2026-03-09 09:00 UTC; reclaimed by the portal."
    assert claim.state_message == stored
    try:
        html = hebrew(alice).get(reverse("claim", args=[claim.pk])).content.decode()
        # What the catalog says for it, with the time in the Hebrew format.
        said = translation.gettext(expiry.EXPIRED) % {"ended": "9 במרץ 2026 09:00 UTC"}
    finally:
        translation.deactivate()
    assert f'id="claim-message">{escape(said)}</span>' in html
    assert f"<div>{escape(said)}</div>" in html  # the timeline's row
    assert stored not in html


def test_it_shows_a_decision_within_a_message_in_the_readers_language(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster)
    extension = expiry.extension_request(user=alice, claim_request=claim, hours=24)
    expiry.extension_approve(user=carol, extension=extension)
    stored = AuditEvent.objects.filter(object_id=claim.pk, object_kind="claim_request").last()
    assert stored is not None
    assert stored.message == (
        "Extended by 24 h, now expires at 2026-03-10 09:00 UTC: Approved by carol."
    )
    with translation.override("he"):
        approved = translation.gettext(expiry.APPROVED_BY) % {"user": "carol"}
        values = {"hours": 24, "ends": "10 במרץ 2026 09:00 UTC", "decision": approved}
        assert user_message(stored.message) == translation.gettext(expiry.EXTENDED) % values
    assert user_message(stored.message) == (
        "Extended by 24 h, now expires at March 10, 2026, 9 a.m. UTC: Approved by carol."
    )
    assert user_message("Asked for 24 h more: no reason given.") == (
        "Asked for 24 h more: no reason given."
    )


def test_it_emails_the_end_in_the_recipients_date_format(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    Profile.objects.create(user=alice, language="he")
    claim = applied_claim(alice, carol, cluster)
    end = time_machine.travel(START + timedelta(days=7), tick=False)
    with django_capture_on_commit_callbacks() as callbacks, end:
        assert expiry.reclaim_expired() == [claim.pk]
    [notice] = notices(callbacks)
    notice.deliver()
    [email] = mail.outbox
    assert "(9 במרץ 2026 09:00 UTC)" in email.body
    with translation.override("he"):
        said = translation.gettext(expiry.EXPIRED) % {"ended": "9 במרץ 2026 09:00 UTC"}
    assert said in email.body
    assert "2026-03-09" not in email.body
