"""Settings of the clusters the portal works on: the default cluster (a kubeconfig or kubesim),
GPU utilisation, the objects the portal makes there (namespaces, runs, workloads, access) and
how it treats a cluster that does not answer."""

import os

from django.core.exceptions import ImproperlyConfigured

from portal.env import VAR_DIR, envbool, envint, envlist, envrange

# The default cluster: a kubeconfig path (a real cluster), else kubesim started by rundemo.
KUBECONFIG = os.getenv("KUBECONFIG", "")
KUBE_CONTEXT = os.getenv("KUBE_CONTEXT", "")
KUBE_IN_CLUSTER = envbool("KUBE_IN_CLUSTER", "False")
SIMULATED_CLUSTER = envbool("SIMULATED_CLUSTER", "False" if KUBECONFIG else "True")
CLUSTER_NAME = os.getenv("CLUSTER_NAME", "kubesim" if SIMULATED_CLUSTER else "default")
KUBESIM_KUBECONFIG = str(VAR_DIR / "kubeconfig")
KUBESIM_SPEED = float(os.getenv("KUBESIM_SPEED", "1"))
# GPU utilisation (docs/operations.md, "Utilisation"): a Prometheus server scraping NVIDIA's
# dcgm-exporter, else the exporters' endpoints read directly (current values only).
PROMETHEUS_URL = os.getenv("PROMETHEUS_URL", "").rstrip("/")
DCGM_EXPORTER_URLS = envlist("DCGM_EXPORTER_URLS", "")

# Seconds a page waits for Prometheus or an exporter before it shows "no data".
UTILISATION_TIMEOUT = envrange("UTILISATION_TIMEOUT", "2", 0.1, 30)
# Seconds the metrics a page reads on every live refresh (a claim's use, the GPU map's) are
# kept in Django's cache; 0: asked every time (claims/read/metrics_cache.py).
UTILISATION_CACHE_SECONDS = envrange("UTILISATION_CACHE_SECONDS", "5", 0, 60)
# A GPU is idle while its activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0-1) stays at or below this.
UTILISATION_IDLE_THRESHOLD = envrange("UTILISATION_IDLE_THRESHOLD", "0.05", 0, 1)

# Where an in-cluster connection reads its ServiceAccount token and CA (the kubelet mounts
# them here); the API server's address comes from KUBERNETES_SERVICE_HOST/PORT.
KUBE_SERVICE_ACCOUNT_DIR = os.getenv(
    "KUBE_SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"
)

# A pass that failed is tried again after this long (seconds).
RUN_FOLLOW_INTERVAL_SECONDS = float(os.getenv("RUN_FOLLOW_INTERVAL_SECONDS", "0.25"))
# How often a one-off sync reads discovery and the inventory again (seconds; a loop watches).
INVENTORY_REFRESH_SECONDS = envint("INVENTORY_REFRESH_SECONDS", "30")
# Approved work with nothing in flight for this long is re-enqueued by the reconciler.
RECONCILE_STALE_SECONDS = envint("RECONCILE_STALE_SECONDS", "30")
# Logs kept per container of a verification run (the tail is kept).
RUN_LOG_MAX_BYTES = envint("RUN_LOG_MAX_BYTES", "262144")

# --- On a shared, real cluster (docs/operations.md) ---
# Labels every object with this, so two installations on one cluster never take each
# other's objects (a DNS-1123 label value).
PORTAL_INSTANCE = os.getenv("PORTAL_INSTANCE", "default")
# The Pod Security level enforced (and warned of) on the namespaces the portal creates: many
# clusters enforce "restricted" on user namespaces; "" leaves the cluster's default.
NAMESPACE_POD_SECURITY = os.getenv("NAMESPACE_POD_SECURITY", "restricted")
if NAMESPACE_POD_SECURITY not in ("", "privileged", "baseline", "restricted"):
    raise ImproperlyConfigured(
        f"NAMESPACE_POD_SECURITY is {NAMESPACE_POD_SECURITY!r}, expected privileged, baseline, "
        "restricted or empty"
    )
# Namespace names refused at the form (shell-style patterns): the cluster's own.
PROTECTED_NAMESPACES = envlist(
    "PROTECTED_NAMESPACES",
    "default,kube-*,openshift-*,gpu-operator,gpu-operator-*,nvidia-*,cert-manager,"
    "istio-system,monitoring",
)
# The verification run's images: the seed's by default; an internal mirror when air-gapped.
VECTOR_ADD_IMAGE = os.getenv(
    "VECTOR_ADD_IMAGE", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
)
DEVICE_QUERY_IMAGE = os.getenv("DEVICE_QUERY_IMAGE", "nvcr.io/nvidia/k8s/cuda-sample:devicequery")
# A run's Pod is stopped by its kubelet after this long (activeDeadlineSeconds) ...
RUN_ACTIVE_DEADLINE_SECONDS = envint("RUN_ACTIVE_DEADLINE_SECONDS", "600")
# ... and one that is still Pending after this long (never scheduled, image never pulled)
# is deleted by the portal and the run fails with the cluster's reason.
RUN_PENDING_TIMEOUT_SECONDS = envint("RUN_PENDING_TIMEOUT_SECONDS", "300")
# Workloads on a claim (claims/domain/services/workloads.py): a Job's deadline when neither its
# profile nor its claim's end sets one, and how long a finished Job is kept (then removed by
# the cluster's TTL controller).
WORKLOAD_MAX_SECONDS = envint("WORKLOAD_MAX_SECONDS", "604800")
WORKLOAD_JOB_TTL_SECONDS = envint("WORKLOAD_JOB_TTL_SECONDS", "86400")
# A notebook gets an Ingress at this host ("{name}" and "{namespace}" are filled in) with this
# IngressClass, when both are set; otherwise users reach it with kubectl port-forward.
NOTEBOOK_HOST_PATTERN = os.getenv("NOTEBOOK_HOST_PATTERN", "")
NOTEBOOK_INGRESS_CLASS = os.getenv("NOTEBOOK_INGRESS_CLASS", "")
# On clusters that run Kueue: the LocalQueue a team's jobs go to when the team names none
# ("default" is the name Kueue's LocalQueueDefaulting gives unlabelled jobs).
KUEUE_LOCAL_QUEUE = os.getenv("KUEUE_LOCAL_QUEUE", "default")
# Access to an active namespace: its owner is bound to this ClusterRole there ...
ACCESS_CLUSTER_ROLE = os.getenv("ACCESS_CLUSTER_ROLE", "edit")
# ... as the cluster user "<ACCESS_USER_PREFIX><username>" (e.g. "oidc:" when the API
# server prefixes OIDC usernames); ACCESS_GRANT_USER=False binds no user identity, for
# clusters whose users have none of their own (the downloadable kubeconfig still works).
ACCESS_USER_PREFIX = os.getenv("ACCESS_USER_PREFIX", "")
ACCESS_GRANT_USER = envbool("ACCESS_GRANT_USER", "True")

# Four-eyes: an approver may not approve a request they own or submitted, unless this is set.
ALLOW_SELF_APPROVAL = envbool("ALLOW_SELF_APPROVAL", "False")
# Lifetime of the token in a downloaded kubeconfig (TokenRequest expirationSeconds).
ACCESS_TOKEN_SECONDS = envint("ACCESS_TOKEN_SECONDS", "28800")
# A task tries a cluster that does not answer again this many times, 1, 2, 4 ... s apart (at
# most the maximum; about 2 minutes in all by default) ...
KUBE_TASK_MAX_RETRIES = envint("KUBE_TASK_MAX_RETRIES", "8")
KUBE_TASK_MAX_BACKOFF_SECONDS = envint("KUBE_TASK_MAX_BACKOFF_SECONDS", "30")
# ... then the work waits this long, doubling each round up to the maximum, and the
# reconciler tries again (seconds).
CLUSTER_WAIT_FIRST_SECONDS = envint("CLUSTER_WAIT_FIRST_SECONDS", "30")
CLUSTER_WAIT_MAX_SECONDS = envint("CLUSTER_WAIT_MAX_SECONDS", "600")
# Client-side rate limit per cluster, for all the portal's processes together (through Redis;
# without it, per process). The sustained rate is kube-scheduler's 50/s, the control-plane
# component whose work, like the portal's, someone waits for (kube-controller-manager: 20/30
# for its ~40 controllers). The burst is kubectl's discovery burst, 300 (client-go's 5/10
# otherwise, per invocation): a flow costs about 10 requests, so a team's 30 flows asked for at
# once go without waiting, where scheduler's 100 held the 11th on; a runaway portal is still
# held to 50/s. A 429 from API Priority and Fairness is sent again after its Retry-After
# (claims/kube/connection.py).
KUBE_CLIENT_QPS = float(os.getenv("KUBE_CLIENT_QPS", "50"))
KUBE_CLIENT_BURST = envint("KUBE_CLIENT_BURST", "300")
