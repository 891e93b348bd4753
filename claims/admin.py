"""The Django admin for teams, quotas, approval rules, webhooks and the rows admins may fix."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db import models

from claims.domain import teams
from claims.models import (
    ApprovalRule,
    AuditEvent,
    ClaimExtension,
    ClaimRequest,
    Cluster,
    IdleWarning,
    NamespaceRequest,
    RunLog,
    Team,
    TeamMembership,
    TeamQuota,
    TeamWebhook,
    VerificationRun,
    WebhookDelivery,
    Workload,
)
from claims.policy import metrics_scope


class ClusterAdminForm(forms.ModelForm):
    """The same checks of the Prometheus fields as the registration form and the API."""

    class Meta:
        model = Cluster
        exclude: list[str] = []

    def clean_prometheus_url(self) -> str:
        url = self.cleaned_data.get("prometheus_url", "").strip()
        if problem := metrics_scope.url_problem(url):
            raise forms.ValidationError(problem)
        return url

    def clean_prometheus_selector(self) -> str:
        selector = self.cleaned_data.get("prometheus_selector", "").strip()
        if problem := metrics_scope.selector_problem(selector):
            raise forms.ValidationError(problem)
        return selector


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterAdminForm
    list_display = (
        "name",
        "simulated",
        "server_version",
        "preferred_resource_version",
        "last_synced_at",
    )


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 1
    autocomplete_fields = ("user",)


class TeamQuotaInline(admin.TabularInline):
    model = TeamQuota
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "auto_approve", "idle_reclaim")
    inlines = [TeamMembershipInline, TeamQuotaInline]

    def save_related(self, request: Any, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # A quota changed here is a quota to put on the team's namespaces in the clusters.
        teams.team_quotas_changed(team=form.instance)


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled", "position", "applies_to", "team", "cluster")
    list_filter = ("enabled", "applies_to")
    list_editable = ("enabled", "position")


class ShownOnlyAdmin(admin.ModelAdmin):
    """Requests and runs are asked for, decided and followed through claims.domain.services and
    claims.domain.observations (each change checked against the quotas, with its audit row), never
    by an edit here: every field is shown read only, and nothing is added."""

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(NamespaceRequest)
class NamespaceRequestAdmin(ShownOnlyAdmin):
    list_display = ("name", "cluster", "owner", "state", "created")
    list_filter = ("state", "cluster")


@admin.register(ClaimRequest)
class ClaimRequestAdmin(ShownOnlyAdmin):
    list_display = ("name", "namespace_request", "owner", "device_class", "state", "created")
    list_filter = ("state",)


class RunLogInline(admin.TabularInline):
    model = RunLog
    extra = 0

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(VerificationRun)
class VerificationRunAdmin(ShownOnlyAdmin):
    list_display = ("pod_name", "claim", "owner", "state", "passed", "device_name", "created")
    list_filter = ("state",)
    inlines = [RunLogInline]


@admin.register(Workload)
class WorkloadAdmin(ShownOnlyAdmin):
    """Profiles are managed on the portal's Workload profiles page (their fields checked as
    the API does); a notebook's token is its owner's alone, never shown here."""

    list_display = ("name", "claim", "owner", "kind", "profile_name", "state", "created")
    list_filter = ("state", "kind")
    exclude = ("access_token_encrypted",)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The trail is append-only (a trigger refuses changes): shown, never added or edited."""

    list_display = (
        "created",
        "action",
        "actor_username",
        "object_kind",
        "object_name",
        "from_state",
        "to_state",
        "channel",
    )
    list_filter = ("action", "object_kind", "channel")
    search_fields = ("object_name", "actor_username", "message")
    show_full_result_count = False

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(TeamWebhook)
class TeamWebhookAdmin(admin.ModelAdmin):
    list_display = ("team", "url", "active")
    # A receiver's address without a scheme is taken as https (Django 6's default already).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """The log of what was POSTed to each webhook (claims/notify/webhooks.py): read only."""

    list_display = ("created", "webhook", "event", "state", "attempts", "last_status")
    list_filter = ("state", "event")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ClaimExtension)
class ClaimExtensionAdmin(admin.ModelAdmin):
    """Asked and decided through the claim's page or the API (claims/domain/expiry.py):
    read only."""

    list_display = ("created", "claim", "extra", "state", "decided_by")
    list_filter = ("state",)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(IdleWarning)
class IdleWarningAdmin(admin.ModelAdmin):
    """Given and ended by idle reclaim (claims/domain/idle_reclaim.py): read only."""

    list_display = ("created", "claim", "state", "deadline", "peak_activity")
    list_filter = ("state",)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
