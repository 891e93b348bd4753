"""Settings of the portal, all from environment variables with safe local defaults.

Every variable is documented in .env.example and docs/operations.md. This module holds
Django's own settings (apps, security, database, sign-in, languages, static files, logging)
and imports the rest from where they are grouped by meaning: portal/worker_settings.py,
cluster_settings.py, notice_settings.py, oidc_settings.py and api_settings.py; the helpers
that read the environment are portal/env.py.
"""

import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from portal import api_settings
from portal.cluster_settings import *  # noqa: F403
from portal.database_settings import databases
from portal.env import (  # noqa: F401 (envrange: read from here by tests)
    BASE_DIR,
    DEBUG,
    VAR_DIR,
    envbool,
    envint,
    envlist,
    envrange,
    proxy_ssl_header,
)
from portal.local_keys import cluster_credentials_keys, secret_key
from portal.logging_settings import logging_config
from portal.notice_settings import *  # noqa: F403
from portal.oidc_settings import *  # noqa: F403
from portal.worker_settings import *  # noqa: F403

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
    pool_size=envint("DB_POOL_SIZE", "16"),
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

# --- Limits on what a request may carry (claims/policy/limits.py has the per-field caps) ---
# Body bytes Django (forms) and the API read; the largest legitimate request, a claim with
# every field at its cap, is under 190 KiB. A larger API body gets 413, a larger form 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", "262144")

# --- Metrics (portal/metrics.py): /metrics on web, METRICS_PORT on workers and followers,
# both only with this bearer token (unset: no metrics at all).
METRICS_TOKEN = os.getenv("METRICS_TOKEN", "")
METRICS_PORT = envint("METRICS_PORT", "0")
# What a worker-like process (the follower) calls to serve its metrics on METRICS_PORT.
PROCESS_METRICS_SERVER = "portal.metrics.serve_for_process"

# Single sign-on (portal/oidc_settings.py) signs in through its own backend.
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
