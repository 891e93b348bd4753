"""Every state change a user asks for goes through one function here.

Each function takes keyword-only arguments, checks permission and the transition, writes the
row and an AuditEvent, and enqueues the cluster work once the transaction commits.
Bad input raises ValidationError with a dict of field errors (NON_FIELD_ERRORS for a state
conflict); a forbidden action raises PermissionDenied. State changes the cluster reports
(through the Celery tasks) live in claims.domain.observations and
claims.domain.run_observations.

One module per model: namespaces, claims, runs, workloads; the steps they share are in steps.
"""

from claims.domain.services.claims import (
    claim_request_approve,
    claim_request_expire,
    claim_request_queue_move,
    claim_request_reclaim_idle,
    claim_request_reject,
    claim_request_release,
    claim_request_retry,
    claim_request_submit,
)
from claims.domain.services.namespaces import (
    namespace_request_approve,
    namespace_request_delete,
    namespace_request_reject,
    namespace_request_retry,
    namespace_request_submit,
)
from claims.domain.services.runs import verification_run_cancel, verification_run_start
from claims.domain.services.workloads import (
    PROFILE_FIELDS,
    NotebookAccess,
    notebook_access,
    workload_access_token,
    workload_profile_delete,
    workload_profile_problems,
    workload_profile_save,
    workload_run_again,
    workload_start,
    workload_stop,
)

__all__ = [
    "PROFILE_FIELDS",
    "NotebookAccess",
    "claim_request_approve",
    "claim_request_expire",
    "claim_request_queue_move",
    "claim_request_reclaim_idle",
    "claim_request_reject",
    "claim_request_release",
    "claim_request_retry",
    "claim_request_submit",
    "namespace_request_approve",
    "namespace_request_delete",
    "namespace_request_reject",
    "namespace_request_retry",
    "namespace_request_submit",
    "notebook_access",
    "verification_run_cancel",
    "verification_run_start",
    "workload_access_token",
    "workload_profile_delete",
    "workload_profile_problems",
    "workload_profile_save",
    "workload_run_again",
    "workload_start",
    "workload_stop",
]
