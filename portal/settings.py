"""Settings of the portal, all from environment variables with safe local defaults.

Every variable is documented in .env.example.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

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


def local_secret_key() -> str:
    # One random key per checkout, so sessions survive a restart of `make run`.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = os.getenv("SECRET_KEY") or local_secret_key()
DEBUG = envbool("DEBUG", "True")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
SITE_NAME = os.getenv("SITE_NAME", "GPU claims portal")

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
    "claims",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
            ],
        },
    },
]

SQLITE_PATH = VAR_DIR / "portal.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        os.getenv("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}", conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so a Celery worker subprocess can share the test database; one per
    # test run, so runs started side by side in one checkout do not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_portal_{os.getpid()}.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Celery: Redis when REDIS_URL is set, otherwise a broker in a SQLite file that needs no
# server (kombu's SQLAlchemy transport: a message is a row, so a reader never sees half of it).
REDIS_URL = os.getenv("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
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
if CELERY_BROKER_URL.startswith("sqlite:"):
    # Celery acks a polling transport's messages only between 2 s waits for more: with one
    # message per thread reserved, the worker would stall that long whenever all are taken.
    CELERY_WORKER_PREFETCH_MULTIPLIER = 16
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
SYNC_INTERVAL_SECONDS = float(os.getenv("SYNC_INTERVAL_SECONDS", "1"))
RECONCILE_INTERVAL_SECONDS = float(os.getenv("RECONCILE_INTERVAL_SECONDS", "20"))
CELERY_BEAT_SCHEDULE = {
    "sync-clusters": {
        "task": "claims.tasks.sync_all_clusters",
        "schedule": SYNC_INTERVAL_SECONDS,
        "options": {"expires": SYNC_INTERVAL_SECONDS * 2},
    },
    "reconcile": {
        "task": "claims.tasks.reconcile",
        "schedule": RECONCILE_INTERVAL_SECONDS,
        "options": {"expires": RECONCILE_INTERVAL_SECONDS},
    },
}

# The default cluster: a kubeconfig path (a real cluster), else kubesim started by rundemo.
KUBECONFIG = os.getenv("KUBECONFIG", "")
KUBE_CONTEXT = os.getenv("KUBE_CONTEXT", "")
KUBE_IN_CLUSTER = envbool("KUBE_IN_CLUSTER", "False")
SIMULATED_CLUSTER = envbool("SIMULATED_CLUSTER", "False" if KUBECONFIG else "True")
CLUSTER_NAME = os.getenv("CLUSTER_NAME", "kubesim" if SIMULATED_CLUSTER else "default")
KUBESIM_KUBECONFIG = str(VAR_DIR / "kubeconfig")
KUBESIM_SPEED = float(os.getenv("KUBESIM_SPEED", "1"))

# While verification runs are under way the sync looks this often (seconds).
RUN_FOLLOW_INTERVAL_SECONDS = float(os.getenv("RUN_FOLLOW_INTERVAL_SECONDS", "0.25"))
# How often the sync refreshes discovery and the device inventory (seconds).
INVENTORY_REFRESH_SECONDS = envint("INVENTORY_REFRESH_SECONDS", "30")
# Approved work with nothing in flight for this long is re-enqueued by the reconciler.
RECONCILE_STALE_SECONDS = envint("RECONCILE_STALE_SECONDS", "30")
# Logs kept per container of a verification run (the tail is kept).
RUN_LOG_MAX_BYTES = envint("RUN_LOG_MAX_BYTES", "262144")

# --- On a shared, real cluster (docs/operations.md) ---
# Labels every object with this, so two installations on one cluster never take each
# other's objects (a DNS-1123 label value).
PORTAL_INSTANCE = os.getenv("PORTAL_INSTANCE", "default")
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
# Access to an active namespace: its owner is bound to this ClusterRole there ...
ACCESS_CLUSTER_ROLE = os.getenv("ACCESS_CLUSTER_ROLE", "edit")
# ... as the cluster user "<ACCESS_USER_PREFIX><username>" (e.g. "oidc:" when the API
# server prefixes OIDC usernames); ACCESS_GRANT_USER=False binds no user identity, for
# clusters whose users have none of their own (the downloadable kubeconfig still works).
ACCESS_USER_PREFIX = os.getenv("ACCESS_USER_PREFIX", "")
ACCESS_GRANT_USER = envbool("ACCESS_GRANT_USER", "True")
# Lifetime of the token in a downloaded kubeconfig (TokenRequest expirationSeconds).
ACCESS_TOKEN_SECONDS = envint("ACCESS_TOKEN_SECONDS", "28800")
# Client-side rate limit of each cluster connection, as client-go's defaults.
KUBE_CLIENT_QPS = float(os.getenv("KUBE_CLIENT_QPS", "5"))
KUBE_CLIENT_BURST = envint("KUBE_CLIENT_BURST", "10")

# The REST API keeps its own settings next to it.
from portal.api_settings import *  # noqa: E402, F403

INSTALLED_APPS += API_APPS  # noqa: F405

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
}
