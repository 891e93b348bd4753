"""The hooks that write to the audit trail: logins, logouts, failures and lockouts (Django's and
django-axes' signals), API tokens, and admins' edits of teams, quotas, rules and clusters.

connect_signals is called once by the app's ready().
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from axes.signals import user_locked_out
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.http import HttpRequest

from claims.domain import state_messages
from claims.domain.audit import Action, Kind, current_user, record
from claims.models import Cluster

# --- Logins, logouts, failures and lockouts (Django's and django-axes' signals) ---


def _session_event(action: str) -> Callable[..., None]:
    """A receiver of user_logged_in or user_logged_out (whose user is None when the session
    had expired: nobody to log out)."""

    def receiver(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
        if user is not None:
            name, pk = user.get_username(), user.pk
            record(
                action,
                kind=Kind.USER,
                object_id=pk,
                name=name,
                owner_id=pk,
                actor=user,
                request=request,
            )

    return receiver


def _login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    name = str(credentials.get("username", ""))
    record(
        Action.LOGIN_FAILED,
        kind=Kind.USER,
        name=name,
        request=request,
        message=state_messages.FAILED_LOGIN % {"name": repr(name)},
    )


def _locked_out(
    sender: Any, request: HttpRequest, username: str, ip_address: str, **kwargs: Any
) -> None:
    record(
        Action.LOCKED_OUT,
        kind=Kind.USER,
        name=username or "",
        request=request,
        message=state_messages.LOCKED_OUT % {"address": ip_address},
    )


# --- API tokens (called by claims.web.views.tokens) ---


def token_created(*, user: Any, token: Any) -> None:
    record(
        Action.TOKEN_CREATED,
        kind=Kind.API_TOKEN,
        name=token.token_key,
        owner_id=user.pk,
        actor=user,
        after={"expiry": token.expiry},
    )


def token_revoked(*, user: Any, token_key: str) -> None:
    record(Action.TOKEN_REVOKED, kind=Kind.API_TOKEN, name=token_key, owner_id=user.pk, actor=user)


# --- Admins' edits of teams, quotas, rules (claims.models.teams) and clusters ---

AUDITED_MODULES = ("claims.models.teams",)
AUDITED_MODELS = ("claims.TeamWebhook", "claims.WorkloadProfile")
# fmt: off
CLUSTER_FIELDS = ["name", "kubeconfig_path", "kubeconfig_encrypted", "in_cluster", "context",
                  "simulated", "image_pull_secret", "prometheus_url", "prometheus_selector"]
# fmt: on
SECRETS = ("secret", "kubeconfig_encrypted", "password", "token")
# fmt: off
KIND_WORDS = (("WorkloadProfile", Kind.WORKLOAD_PROFILE), ("Member", Kind.TEAM_MEMBERSHIP),
              ("Quota", Kind.TEAM_QUOTA), ("Rule", Kind.APPROVAL_RULE),
              ("Webhook", Kind.TEAM_WEBHOOK), ("Team", Kind.TEAM),
              ("Cluster", Kind.CLUSTER), ("User", Kind.USER))
# fmt: on
_BEFORE = "_audit_before"


def _audited_fields(sender: type[models.Model]) -> list[str]:
    """The fields whose edits are recorded: a cluster's connection, all of a team's rows."""
    names = [field.attname for field in sender._meta.concrete_fields]
    if sender is Cluster:
        return [name for name in names if name in CLUSTER_FIELDS]
    audited = sender.__module__ in AUDITED_MODULES or sender._meta.label in AUDITED_MODELS
    return names if audited else []


def _kind_of(sender: type[models.Model]) -> str:
    name = sender.__name__
    return next((kind for word, kind in KIND_WORDS if word in name), sender._meta.model_name or "")


def _values(instance: models.Model, fields: list[str]) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in fields}


def _masked(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """Secrets masked: the trail says that one changed, not to what."""
    if values is None:
        return None
    secret = {name for name, value in values.items() if value and name in SECRETS}
    return {name: "(secret)" if name in secret else value for name, value in values.items()}


def _before_save(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    fields = _audited_fields(sender)
    update_fields = kwargs.get("update_fields")
    if update_fields is not None:
        fields = [f for f in fields if f in update_fields or f.removesuffix("_id") in update_fields]
    if raw or not fields:
        return
    old = sender._default_manager.filter(pk=instance.pk).first() if instance.pk else None
    instance.__dict__[_BEFORE] = (fields, _values(old, fields) if old else None)


def _saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    fields, before = instance.__dict__.pop(_BEFORE, (None, None))
    if not fields:
        return
    after = _values(instance, fields)
    if before is not None:
        changed = [name for name in fields if before[name] != after[name]]
        if not changed:
            return
        before = {name: before[name] for name in changed}
        after = {name: after[name] for name in changed}
    action = Action.CHANGED if before is not None else Action.CREATED
    _record_edit(action, instance, before=_masked(before), after=_masked(after))


def _deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    fields = _audited_fields(sender)
    if fields:
        before = _masked(_values(instance, fields))
        _record_edit(Action.DELETED, instance, before=before, after=None)


_CLEARED = "_audit_cleared"


def _members_changed(
    sender: Any, instance: Any, action: str, model: Any, pk_set: set | None, **kwargs: Any
) -> None:
    if sender.__module__ not in AUDITED_MODULES:
        return
    if action == "pre_clear":  # clear() names nobody: who is about to go, for post_clear
        instance.__dict__[_CLEARED] = _linked(sender, instance, model)
        return
    if action == "post_clear":
        action, pk_set = "post_remove", set(instance.__dict__.pop(_CLEARED, ()))
    if action not in ("post_add", "post_remove"):
        return
    key = f"{model._meta.verbose_name_plural} {'added' if action == 'post_add' else 'removed'}"
    _record_edit(Action.CHANGED, instance, before=None, after={key: sorted(pk_set or ())})


def _linked(through: Any, instance: Any, model: Any) -> list[Any]:
    """The pks of `model` rows the m2m links to instance, read through its through table."""
    fields = [f for f in through._meta.concrete_fields if f.is_relation]
    mine = next(f for f in fields if isinstance(instance, f.related_model))
    theirs = next(f for f in fields if f is not mine and issubclass(model, f.related_model))
    rows = through._default_manager.filter(**{mine.attname: instance.pk})
    return list(rows.values_list(theirs.attname, flat=True))


def _record_edit(action: str, instance: Any, *, before: Any, after: Any) -> None:
    record(
        action,
        kind=_kind_of(type(instance)),
        object_id=instance.pk,
        name=str(instance),
        actor=current_user(),
        before=before,
        after=after,
    )


def connect_signals() -> None:
    """Called once by the app's ready()."""
    for signal, receiver, name in (
        (user_logged_in, _session_event(Action.LOGIN), "login"),
        (user_logged_out, _session_event(Action.LOGOUT), "logout"),
        (user_login_failed, _login_failed, "login_failed"),
        (user_locked_out, _locked_out, "locked_out"),
        (pre_save, _before_save, "before_save"),
        (post_save, _saved, "saved"),
        (post_delete, _deleted, "deleted"),
        (m2m_changed, _members_changed, "members_changed"),
    ):
        signal.connect(receiver, weak=False, dispatch_uid=f"claims.domain.audit_receivers.{name}")
