"""The portal's web pages, one module per area."""

from claims.web.views.approvals import approvals, request_approve, request_reject
from claims.web.views.claims import (
    claim_detail,
    claim_queue_move,
    claim_release,
    claim_retry,
    claim_verify,
    run_cancel,
    run_detail,
)
from claims.web.views.clusters import cluster_detail, cluster_list
from claims.web.views.namespaces import namespace_detail, namespace_kubeconfig
from claims.web.views.requests import (
    claim_request_create,
    claim_request_preview,
    dashboard,
    namespace_delete,
    namespace_request_create,
    namespace_retry,
)

__all__ = [
    "approvals",
    "claim_detail",
    "claim_queue_move",
    "claim_release",
    "claim_request_create",
    "claim_request_preview",
    "claim_retry",
    "claim_verify",
    "cluster_detail",
    "cluster_list",
    "dashboard",
    "namespace_delete",
    "namespace_detail",
    "namespace_kubeconfig",
    "namespace_request_create",
    "namespace_retry",
    "request_approve",
    "request_reject",
    "run_cancel",
    "run_detail",
]
