"""Settings of the test OpenID Connect provider (its own SQLite file, its own cookies)."""

import json
import os
from pathlib import Path

SECRET_KEY = "test-oidc-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The issuer: the address the provider is reached at, given by the fixture.
SITE_URL = os.environ["OIDC_PROVIDER_SITE_URL"]
ROOT_URLCONF = "tests.oidc_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["OIDC_PROVIDER_DB"],
    }
}
# Portal and provider share 127.0.0.1, and cookies ignore ports: names of its own.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
LOGIN_URL = "/accounts/login/"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
OIDC_USERINFO = "tests.oidc_provider.claims.userinfo"
# Claims of each user beyond the standard ones, by username (written by the fixture).
EXTRA_CLAIMS = json.loads(Path(os.environ["OIDC_PROVIDER_CLAIMS"]).read_text())
OIDC_EXTRA_SCOPE_CLAIMS = "tests.oidc_provider.claims.GroupsScopeClaims"
OIDC_IDTOKEN_INCLUDE_CLAIMS = False
