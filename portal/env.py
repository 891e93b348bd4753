"""Reading the portal's settings from the environment: the helpers every settings module uses,
the portal's directories and DEBUG."""

import math
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

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
