"""Every label key the portal writes on what it creates, in one place: its own objects are
told from everyone else's by these (claims.kube.ownership), so a key spelled twice is a bug."""

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-portal"}
# Which installation of the portal made it (two may share a cluster: staging, production).
INSTANCE = "gpu-portal.io/instance"
# The request row an object belongs to (its primary key; empty in a dry-run's manifest).
NAMESPACE_REQUEST = "gpu-portal.io/namespace-request"
CLAIM_REQUEST = "gpu-portal.io/claim-request"
VERIFICATION_RUN = "gpu-portal.io/verification-run"
WORKLOAD = "gpu-portal.io/workload"
# Pod Security admission's, on the namespaces the portal creates (NAMESPACE_POD_SECURITY).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
POD_SECURITY_WARN = "pod-security.kubernetes.io/warn"
# Kueue's: the LocalQueue a Job is submitted to (on clusters that run Kueue), and the uid of
# the Job a Kueue Workload was made for (Kueue writes it).
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"


def is_portal_label(key: str) -> bool:
    return key in MANAGED_BY or key.startswith("gpu-portal.io/")
