from django.urls import include, path, re_path

from claims.api import tokens
from claims.api.views import base as views_base
from claims.api.views import clusters, requests, runs, schema

v1 = [
    path("me/", clusters.MeApi.as_view(), name="api-me"),
    path("clusters/", clusters.ClusterListApi.as_view(), name="api-clusters"),
    path("clusters/<int:pk>/", clusters.ClusterDetailApi.as_view(), name="api-cluster"),
    path(
        "clusters/<int:pk>/device-classes/",
        clusters.DeviceClassListApi.as_view(),
        name="api-cluster-device-classes",
    ),
    path(
        "clusters/<int:pk>/devices/", clusters.DeviceListApi.as_view(), name="api-cluster-devices"
    ),
    path(
        "namespace-requests/",
        requests.NamespaceRequestListApi.as_view(),
        name="api-namespace-requests",
    ),
    path(
        "namespace-requests/<int:pk>/",
        requests.NamespaceRequestDetailApi.as_view(),
        name="api-namespace-request",
    ),
    path(
        "namespace-requests/<int:pk>/approve/",
        requests.NamespaceRequestApproveApi.as_view(),
        name="api-namespace-request-approve",
    ),
    path(
        "namespace-requests/<int:pk>/reject/",
        requests.NamespaceRequestRejectApi.as_view(),
        name="api-namespace-request-reject",
    ),
    path(
        "namespace-requests/<int:pk>/retry/",
        requests.NamespaceRequestRetryApi.as_view(),
        name="api-namespace-request-retry",
    ),
    path("claims/", requests.ClaimListApi.as_view(), name="api-claims"),
    path("claims/<int:pk>/", requests.ClaimDetailApi.as_view(), name="api-claim"),
    path("claims/<int:pk>/approve/", requests.ClaimApproveApi.as_view(), name="api-claim-approve"),
    path("claims/<int:pk>/reject/", requests.ClaimRejectApi.as_view(), name="api-claim-reject"),
    path("claims/<int:pk>/retry/", requests.ClaimRetryApi.as_view(), name="api-claim-retry"),
    path("runs/", runs.RunListApi.as_view(), name="api-runs"),
    path("runs/<int:pk>/", runs.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:pk>/logs/<str:container>/", runs.RunLogApi.as_view(), name="api-run-log"),
    path("events/", runs.EventListApi.as_view(), name="api-events"),
]

urlpatterns = [
    path("v1/", include(v1)),
    # Anything else under v1 gets a JSON 404, not the site's HTML page.
    re_path(r"^v1/", views_base.not_found),
    path("schema/", schema.SchemaApi.as_view(), name="api-schema"),
    path("docs/", schema.SwaggerUi.as_view(), name="api-docs"),
    path("docs/assets/<str:filename>", schema.swagger_ui_asset, name="api-docs-asset"),
    path("tokens/", tokens.token_list, name="api-tokens"),
    path("tokens/new/", tokens.token_create, name="api-token-create"),
    path("tokens/revoke/", tokens.token_revoke, name="api-token-revoke"),
]
