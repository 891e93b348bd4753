"""Notices: one per state change worth telling, sent after the change commits, by email as
each owner chose (Django's locmem outbox), and the preferences page."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from claims.domain import expiry, observations, services
from claims.models import (
    ClaimRequest,
    Cluster,
    Profile,
    Team,
    TeamMembership,
    TeamWebhook,
    WebhookDelivery,
)
from claims.notify import notifications
from tests.fixtures.portal import PASSWORD, make_user

pytestmark = pytest.mark.django_db
ALLOCATION = {
    "node": "gpu-node-1",
    "devices": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0"}
    ],
    "reserved_for": ["pod1"],
}


def submitted(owner: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=owner, cluster=cluster, name=f"note-{uuid.uuid4().hex[:6]}"
    )
    return services.claim_request_submit(
        user=owner, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )


def sent(callbacks: list[Callable[[], Any]]) -> list[tuple[str, str]]:
    """(event, kind) of each notice, delivered as the notify task would."""
    notices = [c for c in callbacks if isinstance(c, notifications.Notice)]
    for notice in notices:
        notice.deliver()
    return [(notice.event, notice.kind) for notice in notices]


def test_it_emails_the_owner_when_an_approver_decides(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    claim = submitted(alice, cluster)
    with django_capture_on_commit_callbacks() as callbacks:
        services.claim_request_approve(user=carol, claim_request=claim)
    # The claim's approval approves its pending namespace too.
    assert sent(callbacks) == [("approved", "claim"), ("approved", "namespace")]
    subjects = [email.subject for email in mail.outbox]
    assert subjects == [
        "Your claim train was approved",
        f"Your namespace request {claim.namespace} was approved",
    ]
    email = mail.outbox[0]
    assert email.to == ["alice@example.org"]
    assert "was approved by carol" in email.body
    assert f"http://localhost:8000/claims/{claim.pk}/" in email.body
    assert "http://localhost:8000/profile/" in email.body


def test_it_tells_the_reason_of_a_rejection(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    claim = submitted(alice, cluster)
    with django_capture_on_commit_callbacks() as callbacks:
        services.claim_request_reject(
            user=carol, claim_request=claim, reason="Use team-a's namespace & its quota."
        )
    assert sent(callbacks) == [("rejected", "claim")]
    [email] = mail.outbox
    assert email.subject == "Your claim train was rejected"
    assert "Reason: Use team-a's namespace & its quota." in email.body  # not HTML-escaped


def test_it_tells_the_first_allocation_and_every_failure(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    claim = submitted(alice, cluster)
    services.claim_request_approve(user=carol, claim_request=claim)
    ClaimRequest.objects.filter(pk=claim.pk).update(state="waiting")
    claim.refresh_from_db()
    with django_capture_on_commit_callbacks() as callbacks:
        observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
        observations.claim_allocation_seen(claim_request=claim, allocation=None)
        observations.claim_allocation_seen(claim_request=claim, allocation=ALLOCATION)
        observations.claim_failed(claim_request=claim, message="admission webhook denied it")
    assert sent(callbacks) == [("allocated", "claim"), ("failed", "claim")]
    allocated, failed = mail.outbox
    assert allocated.subject == "Your claim train got its devices"
    assert "Allocated gpu-0 on gpu-node-1." in allocated.body
    assert failed.subject == "Your claim train failed"
    assert "The cluster said: admission webhook denied it" in failed.body


def test_it_respects_what_each_owner_chose(
    alice: User, bob: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    Profile.objects.create(user=alice, notify_decisions=False)
    bob.email = ""
    bob.save()
    claims = [submitted(alice, cluster), submitted(bob, cluster)]
    with django_capture_on_commit_callbacks() as callbacks:
        for claim in claims:
            services.claim_request_approve(user=carol, claim_request=claim)
        observations.claim_failed(claim_request=claims[0], message="quota exceeded")
    assert len(sent(callbacks)) == 5
    # alice hears of the failure only; bob has no address.
    assert [(email.to, email.subject) for email in mail.outbox] == [
        (["alice@example.org"], "Your claim train failed")
    ]


def test_nothing_is_sent_when_the_change_rolls_back(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    claim = submitted(alice, cluster)
    with django_capture_on_commit_callbacks() as callbacks:
        try:
            with transaction.atomic():
                services.claim_request_approve(user=carol, claim_request=claim)
                raise RuntimeError("the worker died")
        except RuntimeError:
            pass
    assert sent(callbacks) == []


def test_a_notice_for_a_request_gone_meanwhile_is_dropped(alice: User, cluster: Cluster) -> None:
    notifications.Notice("approved", "claim", 2**40, "").deliver()
    assert mail.outbox == []


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_preferences_page_saves_each_choice(alice: User) -> None:
    client = logged_in(alice)
    page = client.get(reverse("profile"))
    assert page.status_code == 200
    html = page.content.decode()
    fields = ("notify_decisions", "notify_allocation", "notify_failure", "notify_expiry")
    for field in (*fields, "notify_approvals"):
        assert f'name="{field}"' in html
    assert "alice@example.org" in html

    answer = client.post(reverse("profile"), {"notify_failure": "on", "notify_expiry": "on"})
    assert answer.status_code == 302
    profile = Profile.objects.get(user=alice)
    assert (profile.notify_decisions, profile.notify_allocation) == (False, False)
    assert (profile.notify_failure, profile.notify_expiry) == (True, True)
    assert notifications.wants(alice, "expiry_reminder")
    assert not notifications.wants(alice, "approved")


def test_the_preferences_page_needs_a_login() -> None:
    answer = Client().get(reverse("profile"))
    assert answer.status_code == 302
    assert answer["Location"].startswith(reverse("login"))


def test_a_mail_server_down_holds_back_neither_the_webhook_nor_the_change(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    team = Team.objects.create(name="vision")
    TeamMembership.objects.create(team=team, user=alice)
    webhook = TeamWebhook.objects.create(team=team, url="http://127.0.0.1:9/hook", secret="s")
    claim = submitted(alice, cluster)
    nobody_listens = {"EMAIL_PORT": 9, "EMAIL_HOST": "127.0.0.1"}
    smtp = "django.core.mail.backends.smtp.EmailBackend"
    with django_capture_on_commit_callbacks() as callbacks:
        services.claim_request_reject(user=carol, claim_request=claim, reason="no")
    with override_settings(EMAIL_BACKEND=smtp, **nobody_listens):
        assert sent(callbacks) == [("rejected", "claim")]
    [delivery] = WebhookDelivery.objects.filter(webhook=webhook)
    assert delivery.payload["object"]["state"] == "rejected"


def test_a_notice_to_the_owner_reads_the_database_once(
    alice: User,
    carol: User,
    cluster: Cluster,
    django_capture_on_commit_callbacks: Any,
    django_assert_num_queries: Any,
) -> None:
    Profile.objects.create(user=alice, language="he")
    claim = submitted(alice, cluster)
    with django_capture_on_commit_callbacks() as callbacks:
        services.claim_request_reject(user=carol, claim_request=claim, reason="no")
    [notice] = [c for c in callbacks if isinstance(c, notifications.Notice)]
    # The claim, its namespace, its owner and who decided, the owner's profile and whether
    # their team has a webhook come in one query.
    with django_assert_num_queries(1):
        notice.deliver()
    [email] = mail.outbox
    assert "train" in email.subject and "rejected" not in email.subject  # in alice's Hebrew


def test_the_webhook_is_the_one_of_the_owners_first_team(
    alice: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    first, second = Team.objects.create(name="vision"), Team.objects.create(name="speech")
    TeamMembership.objects.create(team=first, user=alice)
    TeamMembership.objects.create(team=second, user=alice)
    TeamWebhook.objects.create(team=second, url="http://127.0.0.1:9/second", secret="s")
    claim = submitted(alice, cluster)
    with django_capture_on_commit_callbacks() as callbacks:
        services.claim_request_reject(user=carol, claim_request=claim, reason="no")
    assert sent(callbacks) == [("rejected", "claim")]
    assert not WebhookDelivery.objects.exists()  # the first team has none
    hook = TeamWebhook.objects.create(team=first, url="http://127.0.0.1:9/first", secret="s")
    TeamWebhook.objects.create(team=Team.objects.create(name="other"), url="http://x.test/")
    notifications.deliver(event="rejected", kind="claim", pk=claim.pk, message="no")
    assert [d.webhook for d in WebhookDelivery.objects.all()] == [hook]
    hook.active = False
    hook.save()
    notifications.deliver(event="rejected", kind="claim", pk=claim.pk, message="no")
    assert WebhookDelivery.objects.count() == 1


def test_the_approvers_hear_of_an_extension_left_to_them(
    alice: User, bob: User, carol: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    team = Team.objects.create(name="vision")
    TeamMembership.objects.create(team=team, user=alice)
    TeamMembership.objects.create(team=team, user=bob, role=TeamMembership.Role.APPROVER)
    dave = make_user("dave", approver=True)
    Profile.objects.create(user=dave, notify_approvals=False)
    claim = submitted(alice, cluster)
    services.claim_request_approve(user=carol, claim_request=claim)
    ClaimRequest.objects.filter(pk=claim.pk).update(
        state="waiting", expires_at=timezone.now() + timedelta(days=1), lifetime=timedelta(days=1)
    )
    with django_capture_on_commit_callbacks() as callbacks:
        expiry.extension_request(user=alice, claim_request=claim, hours=12, reason="late run")
    assert sent(callbacks) == [("extension_asked", "claim")]
    # bob approves for his team, carol for everyone; dave said no; alice asked.
    assert sorted(email.to[0] for email in mail.outbox) == ["bob@example.org", "carol@example.org"]
    email = mail.outbox[0]
    assert email.subject == "More time asked for claim train"
    assert "alice asks for more time for claim train" in email.body
    assert "Asked for 12 h more: late run." in email.body
