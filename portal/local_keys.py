"""The keys a local checkout makes for itself in var/ (DEBUG, mypy); production brings its own."""

import base64
import secrets
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def local_secret_key(var_dir: Path) -> str:
    # One random key per checkout, so sessions survive a restart of `make run`.
    path = var_dir / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


def secret_key(configured: str, *, debug: bool, var_dir: Path) -> str:
    """SECRET_KEY as the environment gives it (`configured`), else a local one in DEBUG."""
    if configured:
        return configured
    # mypy's Django plugin imports these settings to read the models; it serves nothing.
    if debug or "mypy" in sys.modules:
        return local_secret_key(var_dir)
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. With DEBUG off the portal needs a secret key from the "
        "environment (50+ random characters, the same for web, worker and beat); "
        "set DEBUG=True for local development only (docs/deploy.md)."
    )


def cluster_credentials_keys(configured: list[str], *, debug: bool, var_dir: Path) -> list[str]:
    """Fernet keys of the uploaded kubeconfigs, newest first (older ones still decrypt, so
    keys rotate): `configured`, else in DEBUG a local key kept in var/; in production none
    is made up: the deploy check fails (claims/clusters/credentials.py)."""
    if configured or not (debug or "mypy" in sys.modules):
        return configured
    path = var_dir / "cluster_credentials_key"
    if not path.exists():
        path.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        path.chmod(0o600)
    return [path.read_text().strip()]
