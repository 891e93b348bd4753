"""Settings of the REST API (claims.api), imported at the end of portal/settings.py."""

from __future__ import annotations

import os
from datetime import timedelta

API_APPS = ["claims.api"]

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # knox's, with failed tokens counted toward the login lockout (portal/lockout.py).
        "portal.lockout.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "claims.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [
        "claims.api.throttling.UserThrottle",
        "claims.api.throttling.AnonThrottle",
    ],
    # Clients are told apart by address: the peer's, or the one this many proxies report.
    "NUM_PROXIES": int(os.getenv("TRUSTED_PROXY_COUNT", "0")),
    "DEFAULT_THROTTLE_RATES": {
        "user": os.getenv("API_THROTTLE_USER", "1200/minute"),
        "anon": os.getenv("API_THROTTLE_ANON", "120/minute"),
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU claims portal API",
    "DESCRIPTION": (
        "Ask for GPU namespaces and DRA claims, approve them, run the CUDA verification and "
        "read its logs. Authenticate with a personal token (`Authorization: Token <token>`) "
        "made on /api/tokens/, or with the browser session (CSRF)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
}

# Personal API tokens: stored hashed; the expiry is chosen per token on the token page.
REST_KNOX = {
    "TOKEN_TTL": None,
    "AUTH_HEADER_PREFIX": "Token",
    "TOKEN_PREFIX": "gpup_",
    "TOKEN_LIMIT_PER_USER": None,
}

# How long a POST's response is replayed for its Idempotency-Key.
API_IDEMPOTENCY_TTL = timedelta(hours=int(os.getenv("API_IDEMPOTENCY_TTL_HOURS", "24")))
# The longest ?wait= a long-poll may ask for, and how often it reads the database when Redis
# (the change signal) is unavailable.
API_LONG_POLL_MAX_SECONDS = 60
API_LONG_POLL_INTERVAL_SECONDS = 0.3
