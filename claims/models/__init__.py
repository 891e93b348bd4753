"""What users asked for (the database is its truth) and what the cluster last told us.

One module per concern; everything is importable from ``claims.models``."""

from claims.models.audit import AuditEvent
from claims.models.core import (
    INSTANCE_LABEL,
    MANAGED_BY,
    ClaimRequest,
    Cluster,
    NamespaceRequest,
    Request,
    RunLog,
    VerificationRun,
    list_indexes,
    managed_labels,
    managed_selector,
    outside_selector,
)
from claims.models.expiry import ClaimExtension, IdleWarning
from claims.models.notifications import TeamWebhook, WebhookDelivery
from claims.models.profile import Profile
from claims.models.teams import ApprovalRule, Team, TeamMembership, TeamQuota
from claims.models.workloads import (
    KueueState,
    Workload,
    WorkloadKind,
    WorkloadLog,
    WorkloadProfile,
)

# The audit trail's name for each kind of request row (AuditEvent.object_kind).
AUDIT_KINDS: dict[type, str] = {
    NamespaceRequest: AuditEvent.Kind.NAMESPACE_REQUEST,
    ClaimRequest: AuditEvent.Kind.CLAIM_REQUEST,
    VerificationRun: AuditEvent.Kind.VERIFICATION_RUN,
    Workload: AuditEvent.Kind.WORKLOAD,
}

__all__ = [
    "AUDIT_KINDS",
    "INSTANCE_LABEL",
    "MANAGED_BY",
    "ApprovalRule",
    "AuditEvent",
    "ClaimExtension",
    "ClaimRequest",
    "Cluster",
    "IdleWarning",
    "KueueState",
    "NamespaceRequest",
    "Profile",
    "Request",
    "RunLog",
    "Team",
    "TeamMembership",
    "TeamQuota",
    "TeamWebhook",
    "VerificationRun",
    "WebhookDelivery",
    "Workload",
    "WorkloadKind",
    "WorkloadLog",
    "WorkloadProfile",
    "list_indexes",
    "managed_labels",
    "managed_selector",
    "outside_selector",
]
