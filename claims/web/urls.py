"""The pages' URLs (the API's are in claims/api/urls.py)."""

from django.urls import path

from claims.web import views
from claims.web.views import audit as audit_views
from claims.web.views import (
    cluster_admin,
    confirm,
    extensions,
    language,
    profile,
    teams,
    tokens,
    workload_profiles,
    workloads,
)

NS = {"kind": "namespace"}
CLAIM = {"kind": "claim"}

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("namespaces/new/", views.namespace_request_create, name="namespace-request"),
    path("namespaces/<int:pk>/", views.namespace_detail, name="namespace"),
    path(
        "namespaces/<int:pk>/kubeconfig/", views.namespace_kubeconfig, name="namespace-kubeconfig"
    ),
    path("namespaces/<int:pk>/retry/", views.namespace_retry, name="namespace-retry"),
    path("namespaces/<int:pk>/delete/", confirm.namespace_delete, name="namespace-delete"),
    path("claims/new/", views.claim_request_create, name="claim-request"),
    path("claims/new/preview/", views.claim_request_preview, name="claim-preview"),
    path("claims/<int:pk>/", views.claim_detail, name="claim"),
    path("claims/<int:pk>/release/", views.claim_release, name="claim-release"),
    path("claims/<int:pk>/retry/", views.claim_retry, name="claim-retry"),
    path("claims/<int:pk>/queue/", views.claim_queue_move, name="claim-queue-move"),
    path("claims/<int:pk>/verify/", views.claim_verify, name="claim-verify"),
    path("claims/<int:pk>/workloads/new/", workloads.workload_start, name="workload-start"),
    path(
        "claims/<int:pk>/workloads/preview/",
        workloads.workload_preview,
        name="workload-preview",
    ),
    path("workloads/<int:pk>/", workloads.workload_detail, name="workload"),
    path("workloads/<int:pk>/stop/", workloads.workload_stop, name="workload-stop"),
    path("workloads/<int:pk>/log/", workloads.workload_log, name="workload-log"),
    path("workloads/<int:pk>/again/", workloads.workload_run_again, name="workload-again"),
    path("workload-profiles/", workload_profiles.profile_list, name="workload-profiles"),
    path("workload-profiles/new/", workload_profiles.profile_edit, name="workload-profile-new"),
    path(
        "workload-profiles/<int:pk>/",
        workload_profiles.profile_edit,
        name="workload-profile",
    ),
    path(
        "workload-profiles/<int:pk>/remove/",
        workload_profiles.profile_remove,
        name="workload-profile-remove",
    ),
    path("claims/<int:pk>/extend/", extensions.extension_request, name="claim-extend"),
    path("extensions/<int:pk>/approve/", extensions.extension_approve, name="extension-approve"),
    path("extensions/<int:pk>/reject/", extensions.extension_reject, name="extension-reject"),
    path("profile/", profile.profile, name="profile"),
    # The API tokens page: a page, kept under /api/ where scripts' users look for it.
    path("api/tokens/", tokens.token_list, name="api-tokens"),
    path("api/tokens/new/", tokens.token_create, name="api-token-create"),
    path("api/tokens/revoke/", confirm.token_revoke, name="api-token-revoke"),
    path("language/", language.set_language, name="set-language"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/ns/<int:pk>/approve/", views.request_approve, NS, name="namespace-approve"),
    path("approvals/ns/<int:pk>/reject/", views.request_reject, NS, name="namespace-reject"),
    path("approvals/claims/<int:pk>/approve/", views.request_approve, CLAIM, name="claim-approve"),
    path("approvals/claims/<int:pk>/reject/", views.request_reject, CLAIM, name="claim-reject"),
    path("teams/", teams.team_list, name="teams"),
    path("teams/<int:pk>/idle-reclaim/", teams.team_idle_policy, name="team-idle-policy"),
    path("gpu-hours/", teams.gpu_hours, name="gpu-hours"),
    path("claims/in-use/", teams.idle_claims, name="idle-claims"),
    path("audit/", audit_views.audit_trail, name="audit"),
    path("audit/export.csv", audit_views.audit_export, name="audit-export"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/<int:pk>/", views.cluster_detail, name="cluster"),
    path("clusters/new/", cluster_admin.cluster_register, name="cluster-register"),
    path("clusters/new/contexts/", cluster_admin.cluster_contexts, name="cluster-contexts"),
    path("clusters/<int:pk>/change/", cluster_admin.cluster_edit, name="cluster-edit"),
    path("clusters/<int:pk>/check/", cluster_admin.cluster_recheck, name="cluster-recheck"),
    path("clusters/<int:pk>/remove/", cluster_admin.cluster_remove, name="cluster-remove"),
    path(
        "clusters/<int:pk>/claims/<int:claim_pk>/",
        views.clusters.cluster_claim_map,
        name="cluster-claim-map",
    ),
]
