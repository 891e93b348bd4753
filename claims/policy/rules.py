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
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Team,
    TeamMembership,
)
from claims.models.teams import approved_team_ids
from claims.policy import quota
from claims.read.selectors import APPROVERS_GROUP, user_is_approver

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


def _submissions(model: type[Decidable], object_id: Any) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(
        object_kind=KIND_OF[model], object_id=object_id, from_state="", to_state="pending"
    ).order_by("created", "id")


def submitter_id(obj: Decidable) -> int | None:
    """Who asked (an approver may submit a claim on a namespace owner's behalf)."""
    first = _submissions(type(obj), obj.pk).first()
    return first.actor_id if first else None


def with_submitters(requests: QuerySet, model: type[Decidable]) -> QuerySet:
    """The requests with their submitter_id's as `submitter` (a page asks in one query)."""
    first = _submissions(model, OuterRef("pk")).values("actor_id")[:1]
    return requests.annotate(submitter=Subquery(first))


class SelfApproval(PermissionDenied):
    """Four-eyes refused an approval: a page can say so on the request it shows."""


def is_own(
    user: Any, obj: Decidable, *, submitter: int | None, asked_by: int | None = None
) -> bool:
    """Four-eyes: whether approving obj would be approving the user's own request (one they
    own, submitted or asked for), unless settings.ALLOW_SELF_APPROVAL."""
    if settings.ALLOW_SELF_APPROVAL:
        return False
    return user.pk in (obj.owner_id, submitter, asked_by)


def approvers_of(obj: Decidable) -> list[Any]:
    """Who may decide obj, its owner never: staff, superusers and the approvers group, and
    the approvers of the owner's team; active users only."""
    return list(_approvers(obj).distinct().order_by("pk"))


def another_approver_exists(user: Any, obj: Decidable, *, submitter: int | None) -> bool:
    """Whether someone who neither is the user nor asked for obj may approve it (one of
    approvers_of): one EXISTS query, not the list of every approver."""
    return _approvers(obj).exclude(pk__in=[user.pk, submitter or user.pk]).exists()


def _approvers(obj: Decidable) -> QuerySet:
    may_decide = Q(is_staff=True) | Q(is_superuser=True) | Q(groups__name=APPROVERS_GROUP)
    team = quota.team_of(obj.owner)
    if team is not None:
        team_approvers = team.memberships.filter(role=TeamMembership.Role.APPROVER)
        may_decide |= Q(pk__in=team_approvers.values("user_id"))
    return get_user_model().objects.filter(may_decide, is_active=True).exclude(pk=obj.owner_id)


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
    if approving and is_own(user, obj, submitter=submitter_id(obj), asked_by=asked_by):
        raise SelfApproval(
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


def _classes(claim: ClaimRequest) -> set[str]:
    return {str(alternative["device_class"]) for alternative in claim.alternatives()}


def _class_rules(applies_to: str, team: Team, claim: ClaimRequest) -> list[ApprovalRule]:
    """The rules that cover every alternative of the claim. The scheduler may allocate any of
    them, so a rule limited to a class covers a claim only when all its alternatives are of
    that class: "a small A100, else the whole H100 node" must not pass under an A100 rule.
    A claim whose alternatives span classes is covered by class-free rules only."""
    classes = _classes(claim)
    device_class = classes.pop() if len(classes) == 1 else ""
    return _matching(applies_to, team, claim.cluster, device_class)


def claim_auto_approval(team: Team | None, claim: ClaimRequest) -> str | None:
    """Why a claim that fits its team's quota is approved without an approver (the audit
    message), or None when an approver must decide. A rule's device limit holds for the
    largest alternative (the most the claim can get, as quota charges it)."""
    if team is None:
        return None
    devices = quota.devices_of(claim)
    for rule in _class_rules("claim", team, claim):
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
    # Whichever alternative it got, the lifetime is within that class's cap.
    for device_class in _classes(claim):
        cap = quota.max_lifetime(team, claim.cluster, device_class)
        if cap is not None and lifetime > cap:
            return None
    for rule in _class_rules("extension", team, claim):
        if rule.max_lifetime is None or lifetime <= rule.max_lifetime:
            return EXTENDED_BY_RULE % {"rule": rule.name}
    return None
