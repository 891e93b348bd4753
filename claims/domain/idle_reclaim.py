"""Idle reclaim, a team's policy (Team.idle_*): a claim whose GPUs' activity stays at or below
the team's threshold for its window is warned (an IdleWarning with the figures and a deadline,
the owner notified); at the deadline the portal releases it through the usual path (its
workloads stop, the ResourceClaim and Pods are deleted), unless it was used again or an
approver granted an extension meanwhile.

A claim whose metrics are missing ("no data": no Prometheus history, no Pod of it runs, the
metrics source down) is never reclaimed for idleness: an open warning is cleared, with why.
Beat runs check_idle_claims with the expiry; the rows are the truth, each step a locked
re-check, so two beats at once warn once and reclaim once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from claims.domain import services
from claims.domain.expiry import stamp
from claims.domain.transitions import record_event
from claims.models import ClaimExtension, ClaimRequest, IdleWarning, Team
from claims.models.teams import first_teams_of_members
from claims.notify import notifications
from claims.read import utilisation

CS = ClaimRequest.State
IW = IdleWarning.State
WATCHED = (CS.WAITING, CS.IN_USE)

WARNED = gettext_noop(
    "Idle since %(since)s: GPU activity at most %(peak)s (the team's threshold is "
    "%(threshold)s for %(minutes)d min); it will be released at %(deadline)s unless it is "
    "used again or an extension is granted."
)
RECLAIMED = gettext_noop(
    "Idle since %(since)s (GPU activity at most %(peak)s, threshold %(threshold)s); "
    "reclaimed by the portal."
)
USED_AGAIN = gettext_noop("Used again: the idle warning is cleared.")
EXTENDED = gettext_noop("An extension was granted: the idle warning is cleared.")
NO_DATA = gettext_noop("No metrics, so not reclaimed for idleness: %(why)s")
ENDED = gettext_noop("The claim ended.")
MESSAGES = (WARNED, RECLAIMED, NO_DATA)


@dataclass
class Outcome:
    warned: list[int] = field(default_factory=list)
    reclaimed: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    no_data: dict[int, str] = field(default_factory=dict)


def check_idle_claims(now: datetime | None = None) -> Outcome:
    """One pass over the claims of teams with the policy, and over every open warning."""
    now = now or timezone.now()
    outcome = Outcome()
    teams = {team.pk: team for team in Team.objects.filter(idle_reclaim=True)}
    owners = first_teams_of_members(list(teams))
    watched = ClaimRequest.objects.filter(
        Q(state__in=WATCHED, owner_id__in=list(owners)) | Q(idle_warnings__state=IW.OPEN)
    ).distinct()
    for claim in watched.select_related("namespace_request"):
        team = teams.get(owners.get(claim.owner_id, 0))
        warning = claim.idle_warnings.filter(state=IW.OPEN).first()
        if team is None or claim.state not in WATCHED:
            if warning is not None and _clear(warning, IW.ENDED, ENDED, now):
                outcome.cleared.append(claim.pk)
            continue
        _check(claim, team, warning, now, outcome)
    return outcome


def _check(
    claim: ClaimRequest, team: Team, warning: IdleWarning | None, now: datetime, outcome: Outcome
) -> None:
    usage = utilisation.claim_usage(claim)
    if usage.no_data or not usage.step:
        why = usage.no_data or "no history of its activity (Prometheus is not set)"
        outcome.no_data[claim.pk] = why
        if warning is not None and _clear(warning, IW.NO_DATA, NO_DATA % {"why": why}, now):
            outcome.cleared.append(claim.pk)
        return
    idle_since = usage.idle_since_below(team.idle_threshold)
    if warning is not None:
        if idle_since is None or idle_since > warning.created:
            if _clear(warning, IW.ACTIVE, USED_AGAIN, now):
                outcome.cleared.append(claim.pk)
        elif _extended_since(claim, warning.created):
            if _clear(warning, IW.EXTENDED, EXTENDED, now):
                outcome.cleared.append(claim.pk)
        elif now >= warning.deadline and _reclaim(warning, now):
            outcome.reclaimed.append(claim.pk)
        return
    if idle_since is None:
        return
    # After a warning that was cleared, a new window starts (an extension buys a window).
    last = claim.idle_warnings.exclude(resolved_at=None).order_by("-resolved_at").first()
    counted_from = max(idle_since, last.resolved_at) if last and last.resolved_at else idle_since
    if now - counted_from >= team.idle_window and _warn(claim, team, usage, idle_since, now):
        outcome.warned.append(claim.pk)


def _extended_since(claim: ClaimRequest, moment: datetime) -> bool:
    return claim.extensions.filter(
        state=ClaimExtension.State.APPROVED, decided_at__gte=moment
    ).exists()


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _warn(
    claim: ClaimRequest,
    team: Team,
    usage: utilisation.Usage,
    idle_since: datetime,
    now: datetime,
) -> bool:
    peak = usage.peak_since(idle_since)
    peak = usage.activity if peak is None else peak  # no step of the range has ended yet
    deadline = now + team.idle_grace
    message = WARNED % {
        "since": stamp(idle_since),
        "peak": _figure(peak),
        "threshold": _figure(team.idle_threshold),
        "minutes": int(team.idle_window.total_seconds() // 60),
        "deadline": stamp(deadline),
    }
    try:
        with transaction.atomic():
            IdleWarning.objects.create(
                claim=claim,
                created=now,
                deadline=deadline,
                idle_since=idle_since,
                peak_activity=peak,
                memory_used_mib=usage.memory_used_mib,
                threshold=team.idle_threshold,
                window=team.idle_window,
            )
            record_event(claim, message, None, action="idle_warning")
            notifications.notify(claim, "idle_warning", message)
    except IntegrityError:
        return False  # another beat warned first (one open warning per claim)
    return True


def _clear(warning: IdleWarning, state: str, message: str, now: datetime) -> bool:
    with transaction.atomic():
        cleared = IdleWarning.objects.filter(pk=warning.pk, state=IW.OPEN).update(
            state=state, resolved_at=now, resolution=message
        )
        if cleared:
            record_event(warning.claim, message, None, action="idle_warning_cleared")
    return bool(cleared)


def _reclaim(warning: IdleWarning, now: datetime) -> bool:
    with transaction.atomic():
        # Locked and checked again: a release or an extension meanwhile wins.
        claim = ClaimRequest.objects.select_for_update().filter(pk=warning.claim_id).first()
        if claim is None or claim.state not in WATCHED:
            return False
        if _extended_since(claim, warning.created):
            return False
        message = RECLAIMED % {
            "since": stamp(warning.idle_since),
            "peak": _figure(warning.peak_activity),
            "threshold": _figure(warning.threshold),
        }
        if not IdleWarning.objects.filter(pk=warning.pk, state=IW.OPEN).update(
            state=IW.RECLAIMED, resolved_at=now, resolution=message
        ):
            return False
        services.claim_request_reclaim_idle(claim_request=claim, message=message)
        notifications.notify(claim, "idle_reclaimed", message)
    return True


def open_warning(claim: ClaimRequest) -> IdleWarning | None:
    return claim.idle_warnings.filter(state=IW.OPEN).first()
