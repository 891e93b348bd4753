"""Settings of the portal, all from environment variables with safe local defaults.

Every variable is documented in .env.example.
"""

import math
import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from portal import api_settings
from portal.beat_schedule import beat_schedule
from portal.database_settings import databases
from portal.local_keys import cluster_credentials_keys, secret_key
from portal.logging_settings import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.getenv("PORTAL_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def envbool(name: str, default: str) -> bool:
    value = os.getenv(name, default).strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise Exception(f"{name} is {value!r}, expected True or False")
    return value in ("true", "1", "yes")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


def envrange(name: str, default: str, low: float, high: float) -> float:
    """A number from the environment within [low, high]; anything else stops the start."""
    text = os.getenv(name, default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:
        raise ImproperlyConfigured(
            f"{name} is {text!r}, expected a number from {low:g} to {high:g}"
        )
    return value


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """("HTTP_X_FORWARDED_PROTO", "https") from "X-Forwarded-Proto"; None when unset."""
    header = os.getenv(name, "").strip()
    if not header:
        return None
    return "HTTP_" + header.upper().replace("-", "_"), "https"


# Off unless asked: `make run` and the test command set what they need themselves.
DEBUG = envbool("DEBUG", "False")
SECRET_KEY = secret_key(os.getenv("SECRET_KEY", ""), debug=DEBUG, var_dir=VAR_DIR)
CLUSTER_CREDENTIALS_KEYS = cluster_credentials_keys(
    envlist("CLUSTER_CREDENTIALS_KEYS", ""), debug=DEBUG, var_dir=VAR_DIR
)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
SITE_NAME = os.getenv("SITE_NAME", "GPU claims portal")

# --- Behind HTTPS in production (docs/deploy.md); all off by default for plain-HTTP local use.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "False")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "False")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "False")
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "False")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "False")
# Trust the scheme a TLS-terminating proxy reports only when told which header it sets.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
# Proxies in front of the portal that append to X-Forwarded-For; 0 = use the peer address.
# The login lockout and the API throttles both count per client address from this.
TRUSTED_PROXY_COUNT = envint("TRUSTED_PROXY_COUNT", "0")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "django_filters",
    "axes",
    "claims",
]

MIDDLEWARE = [
    # First: probes reach /healthz and /readyz whatever their Host and scheme (portal/health.py).
    "portal.health.health_middleware",
    # /metrics (bearer token) before the Host check too; then it times the rest of the chain.
    "portal.metrics.metrics_middleware",
    # The request id of every log line, and of the response's X-Request-ID.
    "portal.request_id.request_id_middleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language: the cookie the switcher sets, else the browser's Accept-Language ...
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # ... unless the signed-in user chose one (Profile.language, claims/web/middleware.py).
    "claims.web.middleware.user_language_middleware",
    # Where each audit row's action came from (claims/web/audit_middleware.py).
    "claims.web.audit_middleware.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a lockout into the page that says so.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.oidc.context",
            ],
        },
    },
]

SQLITE_PATH = VAR_DIR / "portal.sqlite3"
DATABASES = databases(
    os.getenv("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}",
    conn_max_age=envint("CONN_MAX_AGE", "60"),
    var_dir=VAR_DIR,
)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes checks every login (site and admin) for a lockout before the password.
AUTHENTICATION_BACKENDS = [
    "portal.lockout.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed logins and failed API tokens, counted per client address in the database (so every
# web process sees them); this many within the cool-off locks that address out for it.
AXES_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", "10")
AXES_COOLOFF_TIME = timedelta(minutes=envint("LOGIN_COOLOFF_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_CLIENT_IP_CALLABLE = "claims.policy.client_address.client_ip"
AXES_LOCKOUT_CALLABLE = "portal.lockout.lockout_response"
# A success does not wipe the count: a guesser with an account of their own could otherwise
# log in between guesses to start again.
AXES_RESET_ON_SUCCESS = False
AXES_VERBOSE = False  # no banner from every process; failures and lockouts are still logged
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
# English and Hebrew (right to left); the catalog is locale/he, compiled by `make`.
LANGUAGES = [("en", "English"), ("he", "עברית")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# The image collects static files at build time into its own read-only directory.
STATIC_ROOT = Path(os.getenv("STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Celery: Redis when REDIS_URL is set, otherwise a broker in a SQLite file that needs no
# server (kombu's SQLAlchemy transport: a message is a row, so a reader never sees half of it).
REDIS_URL = os.getenv("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
# Live pages and API long-polls wait for a change signal (Redis pub/sub) up to this long (under
# the Ingress's read timeout, 90 s, as the API's 60 s). Each waiting request holds a web thread
# (but no database connection), so a process lets only so many wait (in all, per user); beyond
# that a request answers at once and its client asks again later. An open page costs a request
# per wait: 200 open pages fit two processes. Without Redis, waiters look at the database this
# often instead. 112 of gunicorn's 128 threads (deploy/, Dockerfile, compose): 16 stay for the
# requests that do not wait.
LIVE_WAIT_SECONDS = float(os.getenv("LIVE_WAIT_SECONDS", "55"))
LIVE_WAITERS_MAX = envint("LIVE_WAITERS_MAX", "112")
LIVE_WAITERS_PER_USER = envint("LIVE_WAITERS_PER_USER", "16")
LIVE_FALLBACK_POLL_SECONDS = float(os.getenv("LIVE_FALLBACK_POLL_SECONDS", "2"))
# Of a web process's threads, this many keep their database connection between requests (the
# others close it as their request ends: claims/live/connections.py).
CONN_KEPT_PER_PROCESS = envint("CONN_KEPT_PER_PROCESS", "16")
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL") or REDIS_URL
if not CELERY_BROKER_URL:
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = f"sqlite:///{BROKER_DIR / 'broker.sqlite3'}"
    CELERY_BROKER_TRANSPORT = "portal.celery:SQLiteBroker"
    # Wait for the lock rather than fail while another process writes.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
CELERY_TASK_DEFAULT_QUEUE = os.getenv("CELERY_QUEUE", "portal")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery closes the database connections around every task unless told to reuse them: a new
# PostgreSQL session (a server process) per task. Reused, they are tidied as Django tidies a
# request's (portal/celery.py), and renewed by Celery after twice this many tasks.
CELERY_DB_REUSE_MAX = envint("CELERY_DB_REUSE_MAX", "500")
if CELERY_BROKER_URL.startswith("sqlite:"):
    # Celery acks a polling transport's messages only between 2 s waits for more: with one
    # message per thread reserved, the worker would stall that long whenever all are taken.
    CELERY_WORKER_PREFETCH_MULTIPLIER = 16
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
# Workers log through LOGGING below (JSON in production), not Celery's own handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Beat's reconciler looks for work whose message was lost this often; each cluster's loop
# (manage.py follow_clusters) compares the cluster with the database from its caches as often,
# and sweeps orphans from them every ORPHAN_SWEEP_INTERVAL_SECONDS.
RECONCILE_INTERVAL_SECONDS = float(os.getenv("RECONCILE_INTERVAL_SECONDS", "20"))
ORPHAN_SWEEP_INTERVAL_SECONDS = float(os.getenv("ORPHAN_SWEEP_INTERVAL_SECONDS", "600"))
# The lease of a cluster's loop runs this long unless renewed (a standby takes over then).
FOLLOWER_LEASE_SECONDS = float(os.getenv("FOLLOWER_LEASE_SECONDS", "15"))
# /readyz (portal/health.py): the database and Redis must answer within the timeout, and,
# with READYZ_CHECK_FOLLOWERS, every cluster must have a live loop.
READYZ_TIMEOUT_SECONDS = float(os.getenv("READYZ_TIMEOUT_SECONDS", "2"))
READYZ_CHECK_FOLLOWERS = envbool("READYZ_CHECK_FOLLOWERS", "True")
# How long one watch request lasts before the loop resumes it (servers cap it too).
FOLLOWER_WATCH_SECONDS = envint("FOLLOWER_WATCH_SECONDS", "300")
# A list or watch the cluster refuses (401/403) is asked again after 1/16 of this, doubling up
# to this (seconds): a refusal lasts until an admin grants the permission.
FOLLOWER_REFUSED_RETRY_SECONDS = float(os.getenv("FOLLOWER_REFUSED_RETRY_SECONDS", "300"))
CELERY_BEAT_SCHEDULE = beat_schedule(
    reconcile_seconds=RECONCILE_INTERVAL_SECONDS,
    expiry_seconds=float(os.getenv("EXPIRY_INTERVAL_SECONDS", "60")),
)

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
# without it, per process): kube-scheduler's defaults, the control-plane component whose work,
# like the portal's, someone waits for (kube-controller-manager: 20/30 for its ~40
# controllers; kubectl: client-go's 5/10 per invocation, 50/300 for discovery). A 429 from
# API Priority and Fairness is sent again after its Retry-After (claims/kube/connection.py).
KUBE_CLIENT_QPS = float(os.getenv("KUBE_CLIENT_QPS", "50"))
KUBE_CLIENT_BURST = envint("KUBE_CLIENT_BURST", "100")

# --- Limits on what a request may carry (claims/policy/limits.py has the per-field caps) ---
# Body bytes Django (forms) and the API read; the largest legitimate request, a claim with
# every field at its cap, is under 190 KiB. A larger API body gets 413, a larger form 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", "262144")

# --- Claim lifetimes and notices (claims/domain/expiry.py, claims/notify/notifications.py) ---
# A claim lives this long from the moment its ResourceClaim is created, unless its team's
# quota says otherwise, and never longer than the cap (hours).
CLAIM_DEFAULT_LIFETIME = timedelta(hours=float(os.getenv("CLAIM_DEFAULT_LIFETIME_HOURS", "168")))
CLAIM_MAX_LIFETIME = timedelta(hours=float(os.getenv("CLAIM_MAX_LIFETIME_HOURS", "720")))
# The owner is reminded once before the end: this long before it, or at the given share of
# the lifetime before it, whichever is shorter.
CLAIM_REMINDER_BEFORE = timedelta(hours=float(os.getenv("CLAIM_REMINDER_HOURS", "24")))
CLAIM_REMINDER_FRACTION = float(os.getenv("CLAIM_REMINDER_FRACTION", "0.1"))
# Links in emails and webhook bodies start with this.
SITE_URL = os.getenv("SITE_URL", "http://localhost:8000").rstrip("/")
# Email: printed on the console in DEBUG (make run), sent by SMTP otherwise.
EMAIL_BACKEND = os.getenv("EMAIL_BACKEND") or (
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_HOST = os.getenv("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", "25")
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "False")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", "10")
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
# A team's webhook is tried again this many times, 1x, 2x, 4x ... the first delay apart.
WEBHOOK_MAX_RETRIES = envint("WEBHOOK_MAX_RETRIES", "6")
# Notices (email, team webhook) are sent this long after the change they tell of.
NOTICE_DELAY_SECONDS = float(os.getenv("NOTICE_DELAY_SECONDS", "0.5"))
WEBHOOK_RETRY_SECONDS = float(os.getenv("WEBHOOK_RETRY_SECONDS", "10"))
WEBHOOK_TIMEOUT_SECONDS = float(os.getenv("WEBHOOK_TIMEOUT_SECONDS", "5"))

# --- Metrics (portal/metrics.py): /metrics on web, METRICS_PORT on workers and followers,
# both only with this bearer token (unset: no metrics at all).
METRICS_TOKEN = os.getenv("METRICS_TOKEN", "")
METRICS_PORT = envint("METRICS_PORT", "0")
# What a worker-like process (the follower) calls to serve its metrics on METRICS_PORT.
PROCESS_METRICS_SERVER = "portal.metrics.serve_for_process"

# --- Single sign-on with OpenID Connect (portal/oidc.py); off while no client id is set.
OIDC_RP_CLIENT_ID = os.getenv("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.getenv("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = os.getenv("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.getenv("OIDC_RP_SCOPES", "openid email profile")
OIDC_OP_ISSUER = os.getenv("OIDC_OP_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.getenv("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.getenv("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.getenv("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.getenv("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_PROVIDER_NAME = os.getenv("OIDC_PROVIDER_NAME", "single sign-on")
# The claim that names the user: their portal username and so their cluster identity
# ("<ACCESS_USER_PREFIX><value>"), e.g. preferred_username or email.
OIDC_USERNAME_CLAIM = os.getenv("OIDC_USERNAME_CLAIM", "preferred_username")
# The claim listing the user's groups, and which of them make an approver or an admin.
OIDC_GROUPS_CLAIM = os.getenv("OIDC_GROUPS_CLAIM", "groups")
OIDC_APPROVER_GROUPS = envlist("OIDC_APPROVER_GROUPS", "")
OIDC_ADMIN_GROUPS = envlist("OIDC_ADMIN_GROUPS", "")
# Who may sign in: members of these groups (or of the two above); empty: anyone the provider
# signs in.
OIDC_USER_GROUPS = envlist("OIDC_USER_GROUPS", "")
# A local account of the same username becomes the SSO account at its first sign-in (off: it
# is refused unless an administrator put it in the "single sign-on" group).
OIDC_LINK_LOCAL_ACCOUNTS = envbool("OIDC_LINK_LOCAL_ACCOUNTS", "False")
OIDC_TIMEOUT = float(os.getenv("OIDC_TIMEOUT_SECONDS", "10"))
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
AUTHENTICATION_BACKENDS.append("portal.oidc.PortalOIDCBackend")

# The REST API keeps its own settings next to it (portal/api_settings.py).
INSTALLED_APPS += api_settings.API_APPS
REST_FRAMEWORK = api_settings.REST_FRAMEWORK
SPECTACULAR_SETTINGS = api_settings.SPECTACULAR_SETTINGS
REST_KNOX = api_settings.REST_KNOX
API_IDEMPOTENCY_TTL = api_settings.API_IDEMPOTENCY_TTL
API_LONG_POLL_MAX_SECONDS = api_settings.API_LONG_POLL_MAX_SECONDS
API_LONG_POLL_INTERVAL_SECONDS = api_settings.API_LONG_POLL_INTERVAL_SECONDS

# JSON lines with the request id in production, text in `make run` (portal/request_id.py).
LOG_FORMAT = os.getenv("LOG_FORMAT", "").strip().lower() or ("text" if DEBUG else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"LOG_FORMAT is {LOG_FORMAT!r}, expected json or text")
LOGGING = logging_config(log_format=LOG_FORMAT, level=os.getenv("LOG_LEVEL", "INFO"))
