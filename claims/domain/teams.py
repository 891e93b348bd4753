"""Changes to teams, their members, quotas and the approval rules (the API's writes), and what
follows a change: the team's live namespaces get the new quotas.

Each save is recorded in the audit trail by claims.domain.audit_receivers, as the admin's edits
are (who, from where, before and after). Quota and member changes take the team's row lock, so
they are decided one after the other with the submits and approvals that read the quota.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models, transaction
from django.utils.translation import gettext as _

from claims.domain.transitions import enqueue
from claims.models import ApprovalRule, NamespaceRequest, Team, TeamMembership, TeamQuota
from claims.policy import idle_policy
from claims.policy.quota import charged_users

APPLY_QUOTA = "claims.worker.tasks.apply_namespace_quota"


def team_quotas_changed(*, team: Team) -> None:
    """Put the team's quotas on its live namespaces (after an admin changed them)."""
    _users_quotas_changed(charged_users(team))


def _users_quotas_changed(user_ids: list[int]) -> None:
    live = NamespaceRequest.objects.filter(owner_id__in=user_ids, state="active")
    for ns in live.only("pk"):
        enqueue(APPLY_QUOTA, ns.pk)


def _save(instance: models.Model, fields: dict[str, Any], *, duplicate_field: str) -> None:
    """Set the fields, check the row as the admin's form does, save it. A row that repeats
    another (a unique constraint of several fields) is a bad `duplicate_field`."""
    for name, value in fields.items():
        setattr(instance, name, value)
    try:
        instance.full_clean()
    except ValidationError as error:
        errors = error.message_dict
        if NON_FIELD_ERRORS in errors:
            errors[duplicate_field] = errors.pop(NON_FIELD_ERRORS)
        raise ValidationError(errors) from None
    instance.save()


def _locked(team: Team) -> Team:
    return Team.objects.select_for_update().get(pk=team.pk)


# --- Teams ---


def _check_idle_policy(fields: dict[str, Any]) -> None:
    found = idle_policy.problems(
        fields.get("idle_threshold"), fields.get("idle_window"), fields.get("idle_grace")
    )
    if found:
        raise ValidationError({field: [message] for field, message in found.items()})


def team_create(*, name: str, auto_approve: bool = False, **policy: Any) -> Team:
    """policy: the idle reclaim fields (idle_reclaim, idle_threshold, idle_window,
    idle_grace); the model's defaults otherwise."""
    _check_idle_policy(policy)
    team = Team()
    _save(team, {"name": name, "auto_approve": auto_approve, **policy}, duplicate_field="name")
    return team


def team_update(*, team: Team, **fields: Any) -> Team:
    """fields: name, auto_approve, and the idle reclaim policy's."""
    _check_idle_policy(fields)
    _save(team, fields, duplicate_field="name")
    return team


def team_idle_policy_set(
    *,
    team: Team,
    idle_reclaim: bool,
    idle_threshold: float,
    idle_window: timedelta,
    idle_grace: timedelta,
) -> Team:
    """The team page's form (admins and the team's approvers; the caller checks who)."""
    return team_update(
        team=team,
        idle_reclaim=idle_reclaim,
        idle_threshold=idle_threshold,
        idle_window=idle_window,
        idle_grace=idle_grace,
    )


def team_delete(*, team: Team) -> None:
    """Only an empty team goes: its members' claims would lose their quota unnoticed."""
    with transaction.atomic():
        team = _locked(team)
        if team.memberships.exists():
            message = _("Team %(team)s still has members: remove them first.")
            raise ValidationError(message % {"team": team.name})
        team.delete()


# --- Members ---


def team_member_add(*, team: Team, user: Any, role: str = TeamMembership.Role.MEMBER) -> Any:
    """A new member is charged to this team if it is their first: their namespaces follow."""
    with transaction.atomic():
        membership = TeamMembership(team=_locked(team))
        _save(membership, {"user": user, "role": role}, duplicate_field="user")
        _users_quotas_changed([user.pk])
    return membership


def team_member_update(*, membership: TeamMembership, role: str) -> TeamMembership:
    _save(membership, {"role": role}, duplicate_field="user")
    return membership


def team_member_remove(*, membership: TeamMembership) -> None:
    """The user's namespaces get the quotas of the team they are charged to now (or none)."""
    with transaction.atomic():
        _locked(membership.team)
        membership.delete()
        _users_quotas_changed([membership.user_id])


# --- Quotas ---


def team_quota_create(*, team: Team, **fields: Any) -> TeamQuota:
    """fields: cluster, device_class, max_devices, max_lifetime, default_lifetime."""
    with transaction.atomic():
        quota = TeamQuota(team=_locked(team))
        _save(quota, fields, duplicate_field="device_class")
        team_quotas_changed(team=team)
    return quota


def team_quota_update(*, quota: TeamQuota, **fields: Any) -> TeamQuota:
    with transaction.atomic():
        _locked(quota.team)
        _save(quota, fields, duplicate_field="device_class")
        team_quotas_changed(team=quota.team)
    return quota


def team_quota_delete(*, quota: TeamQuota) -> None:
    """No row means no limit: the namespaces lose that entry of their ResourceQuota."""
    with transaction.atomic():
        team = _locked(quota.team)
        quota.delete()
        team_quotas_changed(team=team)


# --- Approval rules ---


def approval_rule_create(**fields: Any) -> ApprovalRule:
    """fields: name, applies_to, team, cluster, device_class, max_devices, max_lifetime,
    enabled, position."""
    rule = ApprovalRule()
    _save(rule, fields, duplicate_field="name")
    return rule


def approval_rule_update(*, rule: ApprovalRule, **fields: Any) -> ApprovalRule:
    _save(rule, fields, duplicate_field="name")
    return rule


def approval_rule_delete(*, rule: ApprovalRule) -> None:
    rule.delete()
