"""The one way an action enters the audit trail (`record`), and the hooks that call it.

Where an action came from (web, API, admin, or the system; client address and user agent)
is taken from the request being served, which AuditContextMiddleware remembers; the workers
serve none, so their rows say "system". Rows are never changed or deleted: a PostgreSQL
trigger refuses it (migration 0017).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import django_filters
from axes.signals import user_locked_out
from django import forms
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q, QuerySet
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.http import HttpRequest, HttpResponse

from claims import state_messages
from claims.models import AuditEvent, Cluster
from portal.lockout import client_ip

Action = AuditEvent.Action
Kind = AuditEvent.Kind
Channel = AuditEvent.Channel

CHANNELS = (("/api/", Channel.API), ("/admin/", Channel.ADMIN))

_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)


class AuditContextMiddleware:
    """Remembers the request being served, for the rows written while serving it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def current_user() -> Any:
    """Who is making the request being served (None for the workers and anonymous users)."""
    user = getattr(_request.get(), "user", None)
    return user if user is not None and user.is_authenticated else None


def _where(request: HttpRequest | None) -> dict[str, Any]:
    if request is None:
        return {"channel": Channel.SYSTEM}
    path = request.path
    channel = next((c for prefix, c in CHANNELS if path.startswith(prefix)), Channel.WEB)
    agent = request.headers.get("User-Agent", "")[:300]
    return {"channel": channel, "client_ip": client_ip(request) or None, "user_agent": agent}


class AuditEncoder(DjangoJSONEncoder):
    """Times as ISO 8601, rows as their id, anything else odd as its text."""

    def default(self, o: Any) -> Any:
        if isinstance(o, models.Model):
            return o.pk
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def manifest_sha256(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest as canonical JSON: keys sorted, no spaces, UTF-8."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def record(
    action: str,
    *,
    kind: str,
    object_id: Any = None,
    name: str = "",
    owner_id: int | None = None,
    actor: Any = None,
    message: str = "",
    request: HttpRequest | None = None,
    **details: Any,
) -> AuditEvent:
    """Write one audit row. details: from_state, to_state, before, after, manifest_sha256,
    allocation, result. request defaults to the one being served."""
    user = actor if actor is not None and actor.is_authenticated else None
    for field in ("before", "after", "allocation", "result"):
        if details.get(field) is not None:
            details[field] = json.loads(json.dumps(details[field], cls=AuditEncoder))
    return AuditEvent.objects.create(
        action=action,
        actor=user,
        actor_username=user.get_username() if user else "",
        object_kind=kind,
        object_id=object_id if isinstance(object_id, int) else None,
        object_name=str(name)[:253],
        owner_id=owner_id,
        message=message,
        **_where(request or _request.get()),
        **details,
    )


# --- State changes of requests and runs (called by claims.transitions) ---

STATEFUL_KINDS = {
    "namespacerequest": Kind.NAMESPACE_REQUEST,
    "claimrequest": Kind.CLAIM_REQUEST,
    "verificationrun": Kind.VERIFICATION_RUN,
}
# Bookkeeping that every transition writes; the row says it in its own columns or not at all.
UNRECORDED = {"state", "state_message", "updated", "next_attempt_at", "cluster_waits"}
OWN_COLUMNS = {"applied_manifest", "allocation", "devices"}
# fmt: off
RESULT_FIELDS = ("passed", "vector_add_passed", "device_query_passed", "device_name",
                 "compute_capability", "memory_mib")
# fmt: on


def record_change(
    obj: Any,
    *,
    actor: Any,
    from_state: str,
    to_state: str,
    message: str,
    fields: dict[str, Any] | None = None,
    action: str = "",
) -> AuditEvent:
    """A request's or a run's state change (or note), with what the change wrote."""
    fields = fields or {}
    changed = from_state != to_state
    return record(
        action or (Action.STATE_CHANGE if changed else Action.NOTE),
        kind=STATEFUL_KINDS[obj._meta.model_name],
        object_id=obj.pk,
        name=getattr(obj, "name", "") or getattr(obj, "pod_name", ""),
        owner_id=obj.owner_id,
        actor=actor,
        message=message,
        from_state=from_state,
        to_state=to_state,
        **_change_details(from_state, to_state, fields) if changed else {},
    )


def _change_details(from_state: str, to_state: str, fields: dict[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in fields.items() if k not in UNRECORDED | OWN_COLUMNS}
    details: dict[str, Any] = {
        "before": {"state": from_state} if from_state else None,
        "after": {"state": to_state, **{k: v for k, v in plain.items() if k not in RESULT_FIELDS}},
    }
    if fields.get("applied_manifest"):
        details["manifest_sha256"] = manifest_sha256(fields["applied_manifest"])
    if fields.get("allocation") or fields.get("devices"):
        details["allocation"] = fields.get("allocation") or fields.get("devices")
    if "passed" in fields:
        details["result"] = {k: fields[k] for k in RESULT_FIELDS if k in fields}
    return details


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


# --- API tokens (called by claims.api.tokens) ---


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
AUDITED_MODELS = ("claims.TeamWebhook",)
# fmt: off
CLUSTER_FIELDS = ["name", "kubeconfig_path", "kubeconfig_encrypted", "in_cluster", "context",
                  "simulated", "image_pull_secret"]
# fmt: on
SECRETS = ("secret", "kubeconfig_encrypted", "password", "token")
# fmt: off
KIND_WORDS = (("Member", Kind.TEAM_MEMBERSHIP), ("Quota", Kind.TEAM_QUOTA),
              ("Rule", Kind.APPROVAL_RULE), ("Webhook", Kind.TEAM_WEBHOOK), ("Team", Kind.TEAM),
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
        signal.connect(receiver, weak=False, dispatch_uid=f"claims.audit.{name}")


# --- Reading the trail: one set of filters for the page, the CSV and the API ---


class UtcDateTimeField(forms.DateTimeField):
    """A time (ISO 8601, or a date for its midnight) in UTC: PostgreSQL refuses offsets
    Python accepts (e.g. +17:00), so those are a field error here, not a 500 there."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        try:
            return parsed.astimezone(UTC) if parsed else None
        except OverflowError:
            raise forms.ValidationError("That time is out of range.") from None


class TimeFilter(django_filters.Filter):
    field_class = UtcDateTimeField


class AuditTrailFilter(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_username", help_text="Username.")
    action = django_filters.MultipleChoiceFilter(choices=Action.choices)
    object_kind = django_filters.ChoiceFilter(choices=Kind.choices)
    object_name = django_filters.CharFilter(help_text="Exactly this name.")
    since = TimeFilter(field_name="created", lookup_expr="gte", help_text="From (ISO 8601).")
    until = TimeFilter(field_name="created", lookup_expr="lt", help_text="Before (ISO 8601).")
    q = django_filters.CharFilter(
        method="filter_text",
        help_text="Text in the message, name, actor, address or manifest hash.",
    )

    class Meta:
        model = AuditEvent
        fields = ["actor", "action", "object_kind", "object_name", "since", "until", "q"]

    def filter_text(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        text = Q(message__icontains=value) | Q(object_name__icontains=value)
        text |= Q(actor_username__icontains=value) | Q(user_agent__icontains=value)
        text |= Q(manifest_sha256=value.lower()) | Q(client_ip__contains=value)
        return queryset.filter(text)


def trail(*, user: Any = None) -> QuerySet[AuditEvent]:
    """Every row, newest first (approvers and staff only: the callers check)."""
    return AuditEvent.objects.order_by("-id")
