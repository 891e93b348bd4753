"""The portal's LOGGING: JSON lines or text, each with its request id; quiet where noisy."""

from typing import Any

from django.utils.log import CallbackFilter

from portal import logfilters


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """LOGGING for portal/settings.py, which reads LOG_FORMAT ("json" or "text") and
    LOG_LEVEL (the root logger's level) from the environment."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {"()": "portal.request_id.PortalJsonFormatter"},
            "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        },
        "filters": {
            "request_id": {"()": "portal.request_id.RequestIdFilter"},
            "quiet_live_waits": {"()": CallbackFilter, "callback": logfilters.quiet_live_waits},
            "client_errors": {
                "()": CallbackFilter,
                "callback": logfilters.no_traceback_for_client_errors,
            },
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        # "django" prints through root only (its own console handler printed each line twice).
        "loggers": {
            "django": {"propagate": True},
            "django.request": {"filters": ["client_errors"]},
            "django.server": {
                "handlers": ["console"],
                # The access log of runserver (`make run`; gunicorn keeps its own): a line per
                # static file and page buried the demo's URL. It logs a 4xx at WARNING, a 5xx at
                # ERROR, the rest at INFO: only the requests that went wrong are printed.
                "level": "WARNING",
                "filters": ["quiet_live_waits"],
                "propagate": False,
            },
        },
    }
