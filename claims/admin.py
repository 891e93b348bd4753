from django.contrib import admin

from claims.models import (
    AuditEvent,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    RunLog,
    Team,
    VerificationRun,
)


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "simulated",
        "server_version",
        "preferred_resource_version",
        "last_synced_at",
    )


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu_quota", "auto_approve")
    filter_horizontal = ("members",)


@admin.register(NamespaceRequest)
class NamespaceRequestAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "owner", "state", "created")
    list_filter = ("state", "cluster")


@admin.register(ClaimRequest)
class ClaimRequestAdmin(admin.ModelAdmin):
    list_display = ("name", "namespace_request", "owner", "device_class", "state", "created")
    list_filter = ("state",)


class RunLogInline(admin.TabularInline):
    model = RunLog
    extra = 0


@admin.register(VerificationRun)
class VerificationRunAdmin(admin.ModelAdmin):
    list_display = ("pod_name", "claim", "owner", "state", "passed", "device_name", "created")
    list_filter = ("state",)
    inlines = [RunLogInline]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("created", "object_kind", "object_name", "from_state", "to_state", "actor")
    list_filter = ("object_kind", "to_state")
