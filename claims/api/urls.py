"""The REST API's URLs under /api/v1/, its schema and Swagger UI (DRF only: the tokens page is
one of the pages, claims/web)."""

from django.urls import URLPattern, include, path, re_path
from rest_framework.views import APIView

from claims.api.views import (
    audit,
    clusters,
    extensions,
    kubeconfig,
    namespaces,
    preview,
    requests,
    rules,
    runs,
    schema,
    teams,
    workloads,
)
from claims.api.views import base as views_base


def request_urls(
    prefix: str, name: str, *, listing: type[APIView], detail: type[APIView], **steps: type[APIView]
) -> list[URLPattern]:
    """A kind of request: its list, one of them, and the approve/reject/retry steps."""
    return [
        path(f"{prefix}/", listing.as_view(), name=f"api-{name}s"),
        path(f"{prefix}/<int:pk>/", detail.as_view(), name=f"api-{name}"),
        *(
            path(f"{prefix}/<int:pk>/{step}/", api.as_view(), name=f"api-{name}-{step}")
            for step, api in steps.items()
        ),
    ]


v1 = [
    path("me/", clusters.MeApi.as_view(), name="api-me"),
    path("clusters/", clusters.ClusterListApi.as_view(), name="api-clusters"),
    path("clusters/<int:pk>/", clusters.ClusterDetailApi.as_view(), name="api-cluster"),
    path("clusters/<int:pk>/check/", clusters.ClusterCheckApi.as_view(), name="api-cluster-check"),
    path(
        "clusters/<int:pk>/device-classes/",
        clusters.DeviceClassListApi.as_view(),
        name="api-cluster-device-classes",
    ),
    path(
        "clusters/<int:pk>/devices/", clusters.DeviceListApi.as_view(), name="api-cluster-devices"
    ),
    *request_urls(
        "namespace-requests",
        "namespace-request",
        listing=namespaces.NamespaceRequestListApi,
        detail=namespaces.NamespaceRequestDetailApi,
        approve=namespaces.NamespaceRequestApproveApi,
        reject=namespaces.NamespaceRequestRejectApi,
        retry=namespaces.NamespaceRequestRetryApi,
    ),
    path(
        "namespace-requests/<int:pk>/kubeconfig/",
        kubeconfig.NamespaceKubeconfigApi.as_view(),
        name="api-namespace-request-kubeconfig",
    ),
    path("claims/preview/", preview.ClaimPreviewApi.as_view(), name="api-claim-preview"),
    *request_urls(
        "claims",
        "claim",
        listing=requests.ClaimListApi,
        detail=requests.ClaimDetailApi,
        approve=requests.ClaimApproveApi,
        reject=requests.ClaimRejectApi,
        retry=requests.ClaimRetryApi,
        queue=requests.ClaimQueueMoveApi,
    ),
    path("runs/", runs.RunListApi.as_view(), name="api-runs"),
    path("runs/<int:pk>/", runs.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:pk>/logs/<str:container>/", runs.RunLogApi.as_view(), name="api-run-log"),
    path("events/", runs.EventListApi.as_view(), name="api-events"),
    path("workload-profiles/", workloads.ProfileListApi.as_view(), name="api-workload-profiles"),
    path(
        "workload-profiles/<int:pk>/",
        workloads.ProfileDetailApi.as_view(),
        name="api-workload-profile",
    ),
    path("workloads/", workloads.WorkloadListApi.as_view(), name="api-workloads"),
    path("workloads/<int:pk>/", workloads.WorkloadDetailApi.as_view(), name="api-workload"),
    path("workloads/<int:pk>/stop/", workloads.WorkloadStopApi.as_view(), name="api-workload-stop"),
    path("workloads/<int:pk>/logs/", workloads.WorkloadLogApi.as_view(), name="api-workload-log"),
    path(
        "claims/<int:pk>/extensions/",
        extensions.ClaimExtensionListApi.as_view(),
        name="api-claim-extensions",
    ),
    path(
        "extensions/<int:pk>/approve/",
        extensions.ExtensionApproveApi.as_view(),
        name="api-extension-approve",
    ),
    path(
        "extensions/<int:pk>/reject/",
        extensions.ExtensionRejectApi.as_view(),
        name="api-extension-reject",
    ),
    path("audit/", audit.AuditTrailApi.as_view(), name="api-audit"),
    path("teams/", teams.TeamListApi.as_view(), name="api-teams"),
    path("teams/<int:pk>/", teams.TeamDetailApi.as_view(), name="api-team"),
    path("teams/<int:pk>/members/", teams.MemberListApi.as_view(), name="api-team-members"),
    path(
        "teams/<int:pk>/members/<int:member_id>/",
        teams.MemberDetailApi.as_view(),
        name="api-team-member",
    ),
    path("teams/<int:pk>/quotas/", teams.QuotaListApi.as_view(), name="api-team-quotas"),
    path(
        "teams/<int:pk>/quotas/<int:quota_id>/",
        teams.QuotaDetailApi.as_view(),
        name="api-team-quota",
    ),
    path("approval-rules/", rules.RuleListApi.as_view(), name="api-approval-rules"),
    path("approval-rules/<int:pk>/", rules.RuleDetailApi.as_view(), name="api-approval-rule"),
]

urlpatterns = [
    path("v1/", include(v1)),
    # Anything else under v1 gets a JSON 404, not the site's HTML page.
    re_path(r"^v1/", views_base.not_found),
    path("schema/", schema.SchemaApi.as_view(), name="api-schema"),
    path("docs/", schema.SwaggerUi.as_view(), name="api-docs"),
    path("docs/assets/<str:filename>", schema.swagger_ui_asset, name="api-docs-asset"),
]
