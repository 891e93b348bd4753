"""What Celery beat runs and how often: the reconciler of lost work, expiry and idle reclaim,
purges. Nothing here asks a cluster for a list: each cluster's loop watches it
(claims/worker/cluster_loop.py)."""

from typing import Any


def beat_schedule(
    *,
    reconcile_seconds: float,
    expiry_seconds: float,
) -> dict[str, dict[str, Any]]:
    """CELERY_BEAT_SCHEDULE for portal/settings.py, which reads the intervals from the
    environment; a task not started before it expires is dropped (the next one comes)."""
    return {
        "reconcile": {
            "task": "claims.worker.tasks.reconcile",
            "schedule": reconcile_seconds,
            "options": {"expires": reconcile_seconds},
        },
        "expire-claims": {
            "task": "claims.worker.tasks.expire_claims",
            "schedule": expiry_seconds,
            "options": {"expires": 60},
        },
        "reclaim-idle-claims": {
            "task": "claims.worker.tasks.reclaim_idle_claims",
            "schedule": expiry_seconds,
            "options": {"expires": 60},
        },
        "purge-expired-tokens": {
            "task": "claims.worker.tasks.purge_expired_tokens",
            "schedule": 3600.0,
            "options": {"expires": 3600},
        },
        "purge-expired-idempotency": {
            "task": "claims.api.tasks.purge_expired_idempotency",
            "schedule": 3600.0,
            "options": {"expires": 3600},
        },
    }
