from django.urls import path

from claims import views

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
    path("namespaces/<int:pk>/delete/", views.namespace_delete, name="namespace-delete"),
    path("claims/new/", views.claim_request_create, name="claim-request"),
    path("claims/new/preview/", views.claim_request_preview, name="claim-preview"),
    path("claims/<int:pk>/", views.claim_detail, name="claim"),
    path("claims/<int:pk>/release/", views.claim_release, name="claim-release"),
    path("claims/<int:pk>/retry/", views.claim_retry, name="claim-retry"),
    path("claims/<int:pk>/verify/", views.claim_verify, name="claim-verify"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/ns/<int:pk>/approve/", views.request_approve, NS, name="namespace-approve"),
    path("approvals/ns/<int:pk>/reject/", views.request_reject, NS, name="namespace-reject"),
    path("approvals/claims/<int:pk>/approve/", views.request_approve, CLAIM, name="claim-approve"),
    path("approvals/claims/<int:pk>/reject/", views.request_reject, CLAIM, name="claim-reject"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/<int:pk>/", views.cluster_detail, name="cluster"),
]
