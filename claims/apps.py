"""The claims app: connects the signal receivers (audit, change announcements, expiry) at start."""

from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "claims"

    def ready(self) -> None:
        # What follows a state change, connected here so transitions imports neither.
        from claims.domain import expiry
        from claims.domain.transitions import state_changed
        from claims.notify import notifications

        state_changed.connect(expiry.start_clock, dispatch_uid="expiry.start_clock")
        state_changed.connect(notifications.on_state_changed, dispatch_uid="notifications")
        # Logins, logouts, failures, lockouts and admins' edits go to the audit trail.
        from claims.domain.audit_receivers import connect_signals

        connect_signals()
        # Pages waiting on a request or run hear of its removal too.
        from django.db.models.signals import post_delete

        from claims.live.changes import announce_deleted

        post_delete.connect(announce_deleted, dispatch_uid="claims.live.changes.deleted")
        # A signed-in user's saved language goes into the session at login.
        from django.contrib.auth.signals import user_logged_in

        from claims.web.middleware import remember_at_login

        user_logged_in.connect(remember_at_login, dispatch_uid="claims.language")
        # Registers the deploy check of CLUSTER_CREDENTIALS_KEYS.
        from claims.clusters import credentials  # noqa: F401
