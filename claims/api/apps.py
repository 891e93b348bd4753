"""The REST API's Django app (API tokens and idempotency keys live here)."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "claims.api"
    # Its own label, so its table and migrations never collide with the claims app.
    label = "claims_api"
    verbose_name = "REST API"
