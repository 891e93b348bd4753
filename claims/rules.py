"""Who may decide a request, and which requests the admins' rules approve without anyone.

The audit messages naming the rule stay in English (the trail is read by admins and tools);
the refusals a user reads are translated.

Approvers are staff approvers (staff, superusers, the approvers group: every request) and
team approvers (their teams' requests only). Four-eyes: nobody approves a request they own
or submitted unless settings.ALLOW_SELF_APPROVAL. A rule approves only within the team's
quota (the quota is checked first, under the team's lock); users in no team match no rule.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims import quota
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
)
from claims.models.teams import approved_team_ids
from claims.selectors import user_is_approver

Decidable = NamespaceRequest | ClaimRequest
# The audit messages, kept in English; a page shows them translated (gettext_noop marks them
# for the catalog, claims.templatetags.portal.user_message renders them).
BY_RULE = gettext_noop("Approved automatically by rule '%(rule)s' (within team %(team)s's quota).")
BY_TEAM = gettext_noop(
    "Approved automatically by team %(team)s's auto-approval (within its quota)."
)
NAMESPACE_BY_RULE = gettext_noop("Approved automatically by rule '%(rule)s'.")
NAMESPACE_BY_TEAM = gettext_noop("Approved automatically by team %(team)s's auto-approval.")
EXTENDED_BY_RULE = gettext_noop("Extended automatically by rule '%(rule)s'.")
MESSAGES = (BY_RULE, BY_TEAM, NAMESPACE_BY_RULE, NAMESPACE_BY_TEAM, EXTENDED_BY_RULE)
KIND_OF = {
    NamespaceRequest: AuditEvent.Kind.NAMESPACE_REQUEST,
    ClaimRequest: AuditEvent.Kind.CLAIM_REQUEST,
}


def approved_teams(user: Any) -> list[int]:
    """Ids of the teams the user is a team approver of."""
    return approved_team_ids(user)


def is_any_approver(user: Any) -> bool:
    return user_is_approver(user) or bool(approved_teams(user))


def submitter_id(obj: Decidable) -> int | None:
    """Who asked (an approver may submit a claim on a namespace owner's behalf)."""
    first = AuditEvent.objects.filter(
        object_kind=KIND_OF[type(obj)], object_id=obj.pk, from_state="", to_state="pending"
    ).first()
    return first.actor_id if first else None


def require_decider(
    user: Any, obj: Decidable, *, approving: bool, asked_by: int | None = None
) -> None:
    """PermissionDenied unless the user may approve (or reject) this request; asked_by: who
    asked for what is approved, when not the request's submitter (an extension)."""
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied(_("Log in first."))
    if not user_is_approver(user):
        team = quota.team_of(obj.owner)
        if team is None or team.pk not in approved_teams(user):
            raise PermissionDenied(
                _(
                    "Only approvers can approve or reject requests; team approvers only "
                    "their team's."
                )
            )
    own = approving and user.pk in (obj.owner_id, submitter_id(obj), asked_by)
    if own and not settings.ALLOW_SELF_APPROVAL:
        raise PermissionDenied(
            _("You cannot approve your own request: another approver must (four-eyes).")
        )


def _matching(
    applies_to: str, team: Team, cluster: Cluster, device_class: str = ""
) -> list[ApprovalRule]:
    rules = ApprovalRule.objects.filter(enabled=True, applies_to=applies_to)
    rules = rules.filter(Q(team__isnull=True) | Q(team=team))
    rules = rules.filter(Q(cluster__isnull=True) | Q(cluster=cluster))
    if device_class:
        rules = rules.filter(Q(device_class="") | Q(device_class=device_class))
    else:
        rules = rules.filter(device_class="")
    return list(rules.order_by("position", "name"))


def claim_auto_approval(team: Team | None, claim: ClaimRequest) -> str | None:
    """Why a claim that fits its team's quota is approved without an approver (the audit
    message), or None when an approver must decide."""
    if team is None:
        return None
    devices = quota.devices_of(claim)
    for rule in _matching("claim", team, claim.cluster, claim.device_class):
        if rule.max_devices is None or devices <= rule.max_devices:
            return BY_RULE % {"rule": rule.name, "team": team}
    if team.auto_approve:
        return BY_TEAM % {"team": team}
    return None


def namespace_auto_approval(team: Team | None, ns: NamespaceRequest) -> str | None:
    if team is None:
        return None
    rules = _matching("namespace", team, ns.cluster)
    if rules:
        return NAMESPACE_BY_RULE % {"rule": rules[0].name}
    if team.auto_approve:
        return NAMESPACE_BY_TEAM % {"team": team}
    return None


def extension_auto_approval(claim: ClaimRequest, lifetime: timedelta) -> str | None:
    """For a lifetime extension: why the claim may live `lifetime` in all without an
    approver, or None. Never beyond the team's max lifetime for the class."""
    team = quota.team_of(claim.owner)
    if team is None:
        return None
    cap = quota.max_lifetime(team, claim.cluster, claim.device_class)
    if cap is not None and lifetime > cap:
        return None
    for rule in _matching("extension", team, claim.cluster, claim.device_class):
        if rule.max_lifetime is None or lifetime <= rule.max_lifetime:
            return EXTENDED_BY_RULE % {"rule": rule.name}
    return None
