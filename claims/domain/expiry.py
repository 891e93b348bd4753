"""A claim's lifetime: it starts when the ResourceClaim is created in the cluster (the claim
becomes `waiting`; approval alone holds nothing), its owner is reminded once before the end,
and at the end the portal releases it through the usual path (the ResourceClaim and its
runs' Pods are deleted with uid preconditions). The owner may ask for more time: the admins'
rules (claims.policy.rules) grant it, or an approver decides.

The lifetime is the team's default for the claim's cluster and device class (else
CLAIM_DEFAULT_LIFETIME), never more than the team's max lifetime (else CLAIM_MAX_LIFETIME).
Beat runs expire_claims every minute; each step is a conditional UPDATE, so two beats at
once remind once and reclaim once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.domain import services
from claims.domain.transitions import CHANGES, record_event
from claims.models import ClaimExtension, ClaimRequest
from claims.notify import notifications
from claims.policy import quota, rules
from claims.read.selectors import user_is_approver

CS = ClaimRequest.State
# States in which a claim whose clock runs may hold cluster objects.
RUNNING = (CS.APPROVED, CS.APPLYING, CS.WAITING, CS.IN_USE, CS.FAILED)
MAX_EXTENSION_HOURS = 24 * 365

# The messages the claim's rows keep: English (the audit trail stays so), a time as STAMP in
# UTC; a page or an email shows them in its reader's language and date format
# (claims.templatetags.portal.user_message, which knows these).
STAMP = "%Y-%m-%d %H:%M UTC"
EXPIRED = gettext_noop("Expired: its lifetime ended at %(ended)s; reclaimed by the portal.")
ASKED = gettext_noop("Asked for %(hours)d h more: %(reason)s.")
NO_REASON = gettext_noop("no reason given")
APPROVED_BY = gettext_noop("Approved by %(user)s.")
REJECTED = gettext_noop("Extension of %(hours)d h rejected: %(reason)s")
EXTENDED = gettext_noop("Extended by %(hours)d h, now expires at %(ends)s: %(decision)s")
UNDECIDED = gettext_noop("The claim expired before a decision.")
MESSAGES = (EXPIRED, ASKED, APPROVED_BY, REJECTED, EXTENDED)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(STAMP)


def lifetime_limits(claim: ClaimRequest) -> tuple[timedelta, timedelta]:
    """(the claim's lifetime, the most it may live with extensions)."""
    row = quota.owner_quota_row(claim.owner_id, claim.cluster, claim.device_class)
    cap = (row.max_lifetime if row else None) or settings.CLAIM_MAX_LIFETIME
    default = quota.default_lifetime_of(row)
    return min(default or settings.CLAIM_DEFAULT_LIFETIME, cap), cap


def start_clock(sender: type, *, obj: Any, to_state: str, **kwargs: Any) -> None:
    """Receiver of transitions.state_changed: the first time a claim is in the cluster, its
    lifetime starts (in the transaction of that change). A re-apply after drift keeps it."""
    if not isinstance(obj, ClaimRequest) or to_state != CS.WAITING or obj.expires_at:
        return
    lifetime = lifetime_limits(obj)[0]
    expires_at = timezone.now() + lifetime
    started = ClaimRequest.objects.filter(pk=obj.pk, expires_at__isnull=True).update(
        lifetime=lifetime, expires_at=expires_at
    )
    if started:
        obj.lifetime, obj.expires_at = lifetime, expires_at


def start_missing_clocks() -> list[int]:
    """Claims in the cluster from before lifetimes existed (an upgrade) get one from now:
    reclaiming them at once, by their age, would surprise their owners."""
    started = []
    for claim in ClaimRequest.objects.filter(
        state__in=(CS.WAITING, CS.IN_USE), expires_at__isnull=True
    ).select_related("namespace_request__cluster"):
        start_clock(ClaimRequest, obj=claim, to_state=CS.WAITING)
        started.append(claim.pk)
    return started


def reminder_at(claim: ClaimRequest) -> datetime | None:
    if claim.expires_at is None:
        return None
    lead = settings.CLAIM_REMINDER_BEFORE
    if claim.lifetime:
        lead = min(lead, claim.lifetime * settings.CLAIM_REMINDER_FRACTION)
    return claim.expires_at - lead


def send_reminders(now: datetime | None = None) -> list[int]:
    """Remind the owners of claims near their end, once per end; the ids reminded."""
    now = now or timezone.now()
    near = ClaimRequest.objects.filter(
        state__in=RUNNING,
        reminded_at__isnull=True,
        expires_at__gt=now,
        expires_at__lte=now + settings.CLAIM_REMINDER_BEFORE,
    )
    reminded = []
    for claim in near.select_related("namespace_request"):
        due = reminder_at(claim)
        if due is None or due > now:
            continue
        with transaction.atomic():
            if ClaimRequest.objects.filter(pk=claim.pk, reminded_at__isnull=True).update(
                reminded_at=now
            ):
                notifications.notify(claim, "expiry_reminder")
                reminded.append(claim.pk)
    return reminded


def reclaim_expired(now: datetime | None = None) -> list[int]:
    """Release every claim whose lifetime has ended; the ids reclaimed."""
    now = now or timezone.now()
    due = ClaimRequest.objects.filter(state__in=RUNNING, expires_at__lte=now)
    return [pk for pk in due.values_list("pk", flat=True) if _reclaim(pk, now)]


def _reclaim(pk: int, now: datetime) -> bool:
    with transaction.atomic():
        # Locked and checked again: an extension granted meanwhile wins.
        claim = (
            ClaimRequest.objects.select_for_update()
            .filter(pk=pk, state__in=RUNNING, expires_at__lte=now)
            .first()
        )
        if claim is None or claim.expires_at is None:
            return False
        message = EXPIRED % {"ended": stamp(claim.expires_at)}
        try:
            services.claim_request_expire(claim_request=claim, message=message)
        except ValidationError:
            return False  # released by its owner meanwhile
        lapse = CHANGES[ClaimExtension]["lapse"]
        claim.extensions.filter(state__in=lapse.sources).update(
            state=lapse.to, decided_at=now, decision=UNDECIDED
        )
        notifications.notify(claim, "reclaimed", message)
    return True


def extension_request(
    *, user: Any, claim_request: ClaimRequest, hours: int, reason: str = ""
) -> ClaimExtension:
    """Ask for `hours` more; granted at once when a rule allows it, else an approver decides."""
    claim = claim_request
    if not user.is_authenticated or (user.pk != claim.owner_id and not user_is_approver(user)):
        raise PermissionDenied(_("Only the claim's owner can ask for more time."))
    if not isinstance(hours, int) or not 1 <= hours <= MAX_EXTENSION_HOURS:
        message = _("Ask for 1 to %(max)d hours.") % {"max": MAX_EXTENSION_HOURS}
        raise ValidationError({"hours": [message]})
    extension, decision = _ask(user, claim.pk, timedelta(hours=hours), (reason or "").strip())
    if decision:
        _grant(extension, None, decision)
    return extension


def _ask(user: Any, pk: int, extra: timedelta, reason: str) -> tuple[ClaimExtension, str | None]:
    """Record the ask, and what the rules say; the approvers hear of one left to them."""
    try:
        with transaction.atomic():
            # Locked: a reclaim at this moment either comes first (refused here) or waits.
            claim = ClaimRequest.objects.select_for_update().get(pk=pk)
            _require_running(claim)
            _require_askable(claim, extra)
            extension = ClaimExtension.objects.create(
                claim=claim,
                requested_by=user,
                extra=extra,
                reason=reason,
                expires_before=claim.expires_at,
            )
            asked = ASKED % {"hours": _hours(extension), "reason": reason or NO_REASON}
            record_event(claim, asked, user, action="extension_asked")
            decision = _auto_decision(claim, extra)
            if decision is None:
                notifications.notify(claim, "extension_asked", asked)
    except IntegrityError:
        raise ValidationError(
            {NON_FIELD_ERRORS: [_("An extension of this claim is already waiting for a decision.")]}
        ) from None
    return extension, decision


def _require_running(claim: ClaimRequest) -> None:
    if claim.state not in RUNNING or claim.expires_at is None:
        raise ValidationError(
            {
                NON_FIELD_ERRORS: [
                    _(
                        "The claim is %(state)s: only a claim whose lifetime runs (created in "
                        "the cluster, not released) can be extended."
                    )
                    % {"state": claim.get_state_display()}
                ]
            }
        )


def _auto_decision(claim: ClaimRequest, extra: timedelta) -> str | None:
    lifetime = (claim.lifetime or timedelta()) + extra
    cap = lifetime_limits(claim)[1]
    if lifetime > cap:
        return None
    return rules.extension_auto_approval(claim, lifetime)


def extension_approve(*, user: Any, extension: ClaimExtension) -> ClaimExtension:
    """Four-eyes here too: nobody approves the time they asked for (an approver may ask on
    an owner's behalf), unless settings.ALLOW_SELF_APPROVAL."""
    rules.require_decider(user, extension.claim, approving=True, asked_by=extension.requested_by_id)
    _grant(extension, user, APPROVED_BY % {"user": user.get_username()})
    return extension


def extension_reject(*, user: Any, extension: ClaimExtension, reason: str) -> ClaimExtension:
    rules.require_decider(user, extension.claim, approving=False)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": [_("Say why, so the owner knows what to change.")]})
    with transaction.atomic():
        _decide(extension, "reject", user, reason)
        record_event(
            extension.claim, REJECTED % {"hours": _hours(extension), "reason": reason}, user
        )
        notifications.notify(extension.claim, "extension_rejected", reason)
    return extension


def _grant(extension: ClaimExtension, actor: Any, decision: str) -> None:
    with transaction.atomic():
        claim = ClaimRequest.objects.select_for_update().get(pk=extension.claim_id)
        _require_running(claim)
        assert claim.expires_at is not None  # checked by _require_running
        ends = claim.expires_at + extension.extra
        lifetime = (claim.lifetime or timedelta()) + extension.extra
        _require_within_cap(claim, lifetime)
        _decide(extension, "approve", actor, decision, expires_after=ends)
        ClaimRequest.objects.filter(pk=claim.pk).update(
            expires_at=ends, lifetime=lifetime, reminded_at=None
        )
        claim.expires_at, claim.lifetime = ends, lifetime
        extension.claim = claim
        values = {"hours": _hours(extension), "ends": stamp(ends), "decision": decision}
        message = EXTENDED % values
        record_event(claim, message, actor)
        notifications.notify(claim, "extension_approved", message)


def _require_within_cap(claim: ClaimRequest, lifetime: timedelta) -> None:
    """The max lifetime holds for an approver's grant as for a rule's."""
    cap = lifetime_limits(claim)[1]
    if lifetime > cap:
        hours = {"lifetime": _in_hours(lifetime), "cap": _in_hours(cap)}
        message = _(
            "That would make the claim's lifetime %(lifetime)d h in all, more than its "
            "maximum of %(cap)d h: reject it, or ask for fewer hours."
        )
        raise ValidationError({NON_FIELD_ERRORS: [message % hours]})


def _require_askable(claim: ClaimRequest, extra: timedelta) -> None:
    """Time that no one could grant is refused at once, with how much is left to ask for."""
    lifetime = (claim.lifetime or timedelta()) + extra
    cap = lifetime_limits(claim)[1]
    if lifetime > cap:
        left = max(_in_hours(cap - (claim.lifetime or timedelta())), 0)
        values = {"lifetime": _in_hours(lifetime), "cap": _in_hours(cap), "left": left}
        message = _(
            "That would make the claim's lifetime %(lifetime)d h in all, more than its "
            "maximum of %(cap)d h: ask for %(left)d h at most."
        )
        raise ValidationError({"hours": [message % values]})


def _decide(extension: ClaimExtension, name: str, actor: Any, decision: str, **fields: Any) -> None:
    """Pending → decided ("approve", "reject" in transitions.CHANGES), once: of two approvers
    deciding at the same time one wins."""
    step = CHANGES[ClaimExtension][name]
    now = timezone.now()
    values = {
        "state": step.to,
        "decided_by": actor,
        "decided_at": now,
        "decision": decision,
        **fields,
    }
    decidable = ClaimExtension.objects.filter(pk=extension.pk, state__in=step.sources)
    if not decidable.update(**values):
        extension.refresh_from_db()
        raise ValidationError(
            {
                NON_FIELD_ERRORS: [
                    _("This extension is already %(state)s.")
                    % {"state": extension.get_state_display()}
                ]
            }
        )
    for field, value in values.items():
        setattr(extension, field, value)


def _hours(extension: ClaimExtension) -> int:
    return _in_hours(extension.extra)


def _in_hours(length: timedelta) -> int:
    return round(length.total_seconds() / 3600)
