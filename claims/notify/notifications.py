"""What people are told: an email to the owner (as their profile asks) and a POST to the
team's webhook, for approval, rejection, allocation, failure, expiry reminder and reclaim.

State changes reach here in one place, the transitions' `state_changed` signal; the two
notices that are not state changes of their own (a reminder, a reclaim, an extension's
decision) are sent by claims.domain.expiry. Nothing is sent before the change commits, and the
sending is a Celery task (claims.worker.tasks.notify), so a slow mail server delays no request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from smtplib import SMTPException
from typing import Any

from celery import current_app as app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from claims.models import (
    AuditEvent,
    ClaimRequest,
    NamespaceRequest,
    Profile,
    TeamWebhook,
)
from claims.models.teams import first_team_id
from claims.notify import webhooks
from claims.policy import rules

log = logging.getLogger(__name__)
Notified = NamespaceRequest | ClaimRequest
KINDS: dict[str, type[Notified]] = {"namespace": NamespaceRequest, "claim": ClaimRequest}


@dataclass(frozen=True)
class Event:
    subject: str | Promise  # formatted with what= and name=, in the recipient's language
    preference: str  # the Profile field that lets the owner turn it off


EVENTS = {
    "approved": Event(_("Your {what} {name} was approved"), "notify_decisions"),
    "rejected": Event(_("Your {what} {name} was rejected"), "notify_decisions"),
    "allocated": Event(_("Your claim {name} got its devices"), "notify_allocation"),
    "failed": Event(_("Your {what} {name} failed"), "notify_failure"),
    "expiry_reminder": Event(_("Your claim {name} expires soon"), "notify_expiry"),
    "reclaimed": Event(_("Your claim {name} expired and was reclaimed"), "notify_expiry"),
    "idle_warning": Event(_("Your claim {name} is idle and will be released"), "notify_expiry"),
    "idle_reclaimed": Event(_("Your idle claim {name} was released"), "notify_expiry"),
    "extension_approved": Event(_("More time for your claim {name}"), "notify_decisions"),
    "extension_rejected": Event(_("No extension for your claim {name}"), "notify_decisions"),
    "extension_asked": Event(_("More time asked for claim {name}"), "notify_approvals"),
}
# Told to the approvers who may decide, not to the owner.
APPROVER_EVENTS = ("extension_asked",)


@dataclass(frozen=True)
class Notice:
    """One notice to send once the transaction commits (an on-commit callback)."""

    event: str
    kind: str
    pk: int
    message: str

    def __call__(self) -> None:
        args = (self.event, self.kind, self.pk, self.message)
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        # A moment later than the work the change started (an apply, a Pod), which shares the
        # worker: nobody waits on an email, somebody waits on the cluster.
        countdown = settings.NOTICE_DELAY_SECONDS or None
        try:
            app.send_task("claims.worker.tasks.notify", args=args, queue=queue, countdown=countdown)
        except Exception as error:  # a broker that is down must not fail the change it tells of
            log.warning("notice %s of %s %s not queued: %s", self.event, self.kind, self.pk, error)

    def deliver(self) -> None:
        """What the task does with it (tests call this in-process)."""
        deliver(event=self.event, kind=self.kind, pk=self.pk, message=self.message)


def notify(obj: Notified, event: str, message: str = "") -> None:
    kind = "claim" if isinstance(obj, ClaimRequest) else "namespace"
    transaction.on_commit(Notice(event, kind, obj.pk, message))


def on_state_changed(
    sender: type,
    *,
    obj: Any,
    from_state: str,
    to_state: str,
    actor: Any,
    message: str,
    **kwargs: Any,
) -> None:
    """Receiver of claims.domain.transitions.state_changed (connected in ClaimsConfig.ready)."""
    if actor is not None and actor.pk == getattr(obj, "owner_id", None):
        return  # the owner did it (withdrew, released): nothing to tell them
    event = _event_for(obj, str(from_state), str(to_state))
    if event:
        notify(obj, event, message)


def _event_for(obj: Any, from_state: str, to_state: str) -> str | None:
    if not isinstance(obj, NamespaceRequest | ClaimRequest):
        return None
    if to_state in ("approved", "rejected") and from_state == "pending":
        return to_state
    if to_state == "failed":
        return "failed"
    if isinstance(obj, ClaimRequest) and to_state == "in_use" and _first_allocation(obj):
        return "allocated"
    return None


def _first_allocation(claim: ClaimRequest) -> bool:
    """The claim flips between waiting and in use with every Pod: tell the owner once."""
    rows = AuditEvent.objects.filter(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST, object_id=claim.pk, to_state="in_use"
    )
    return rows.exclude(from_state="in_use").count() <= 1


def deliver(*, event: str, kind: str, pk: int, message: str) -> None:
    """Email the owner (unless they said no) and POST to their team's webhook."""
    obj = _notified(kind, pk)
    if obj is None or event not in EVENTS:
        return
    context = _context(obj, kind, event, message)
    # Read only when there is one (removed meanwhile: nothing to post to).
    webhook = TeamWebhook.objects.filter(pk=obj.webhook_pk).first() if obj.webhook_pk else None
    if webhook is not None:
        webhooks.queue(webhook, event, _payload(obj, kind, event, context))
    try:
        _email(obj, event, context)
    except (OSError, SMTPException) as error:
        # The notice stays in the webhook's log and the audit trail; mail is best effort.
        log.warning("email %s about %s %s not sent: %s", event, kind, pk, error)


def _notified(kind: str, pk: int) -> Any:
    """The object told of, with its owner and the owner's profile, and as webhook_pk the
    active webhook of the owner's (first) team: one query."""
    related = ["owner__portal_profile", "decided_by"]
    related += ["namespace_request"] if kind == "claim" else []
    webhook = TeamWebhook.objects.filter(
        team_id=first_team_id(OuterRef(OuterRef("owner_id"))), active=True
    )
    objects = KINDS[kind].objects.select_related(*related)
    return objects.annotate(webhook_pk=Subquery(webhook.values("pk")[:1])).filter(pk=pk).first()


def _context(obj: Notified, kind: str, event: str, message: str) -> dict[str, Any]:
    what = gettext_noop("claim") if kind == "claim" else gettext_noop("namespace request")
    path = reverse("claim" if kind == "claim" else "namespace", args=[obj.pk])
    return {
        "obj": obj,
        "what": what,
        "event": event,
        "message": message,
        "url": settings.SITE_URL + path,
        "profile_url": settings.SITE_URL + reverse("profile"),
        "site_name": settings.SITE_NAME,
        "subject": str(EVENTS[event].subject).format(what=what, name=obj.name),
    }


def wants(user: Any, event: str) -> bool:
    return _profile_wants(Profile.objects.filter(user=user).first(), event)


def _profile_wants(profile: Profile | None, event: str) -> bool:
    return profile is None or bool(getattr(profile, EVENTS[event].preference))


def recipients(obj: Notified, event: str) -> list[Any]:
    """The owner; for a decision to make, the approvers who may make it (never the owner)."""
    if event not in APPROVER_EVENTS:
        return [obj.owner]
    return rules.approvers_of(obj)


def _email(obj: Notified, event: str, context: dict[str, Any]) -> None:
    for user in recipients(obj, event):
        if not user.email:
            continue
        if user == obj.owner:
            profile = _selected_profile(user)
        else:
            profile = Profile.objects.filter(user=user).first()
        if _profile_wants(profile, event):
            _email_one(user, profile, obj, event, context)


def _email_one(
    user: Any, profile: Profile | None, obj: Notified, event: str, context: dict[str, Any]
) -> None:
    """In the recipient's language (their profile's, else the site's)."""
    with translation.override((profile.language if profile else "") or settings.LANGUAGE_CODE):
        what = gettext(context["what"])
        subject = str(EVENTS[event].subject).format(what=what, name=obj.name)
        extra = {"subject": subject, "recipient": user}
        body = render_to_string(f"emails/{event}.txt", context | extra)
    send_mail(str(subject), body, None, [user.email])


def _selected_profile(user: Any) -> Profile | None:
    """The profile select_related brought with the user, if they have one."""
    try:
        profile: Profile = user.portal_profile
    except Profile.DoesNotExist:
        return None
    return profile


def _payload(obj: Notified, kind: str, event: str, context: dict[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "kind": kind,
        "id": obj.pk,
        "name": obj.name,
        "state": obj.state,
        "owner": obj.owner.get_username(),
        "url": context["url"],
    }
    if isinstance(obj, ClaimRequest):
        described |= {
            "namespace": obj.namespace_request.name,
            "expires_at": obj.expires_at.isoformat() if obj.expires_at else None,
        }
    return {
        "event": event,
        "occurred_at": timezone.now().isoformat(),
        "subject": context["subject"],
        "message": context["message"],
        "object": described,
    }
