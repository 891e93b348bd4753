"""Settings of claim lifetimes and the notices the portal sends (email, team webhooks)."""

import os
from datetime import timedelta

from portal.env import DEBUG, envbool, envint

# --- Claim lifetimes and notices (claims/domain/expiry.py, claims/notify/notifications.py) ---
# A claim lives this long from the moment its ResourceClaim is created, unless its team's
# quota says otherwise, and never longer than the cap (hours).
CLAIM_DEFAULT_LIFETIME = timedelta(hours=float(os.getenv("CLAIM_DEFAULT_LIFETIME_HOURS", "168")))
CLAIM_MAX_LIFETIME = timedelta(hours=float(os.getenv("CLAIM_MAX_LIFETIME_HOURS", "720")))
# The owner is reminded once before the end: this long before it, or at the given share of
# the lifetime before it, whichever is shorter.
CLAIM_REMINDER_BEFORE = timedelta(hours=float(os.getenv("CLAIM_REMINDER_HOURS", "24")))
CLAIM_REMINDER_FRACTION = float(os.getenv("CLAIM_REMINDER_FRACTION", "0.1"))
# Links in emails and webhook bodies start with this.
SITE_URL = os.getenv("SITE_URL", "http://localhost:8000").rstrip("/")
# Email: printed on the console in DEBUG (make run), sent by SMTP otherwise.
EMAIL_BACKEND = os.getenv("EMAIL_BACKEND") or (
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_HOST = os.getenv("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", "25")
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "False")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", "10")
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
# A team's webhook is tried again this many times, 1x, 2x, 4x ... the first delay apart.
WEBHOOK_MAX_RETRIES = envint("WEBHOOK_MAX_RETRIES", "6")
# Notices (email, team webhook) are sent this long after the change they tell of.
NOTICE_DELAY_SECONDS = float(os.getenv("NOTICE_DELAY_SECONDS", "0.5"))
WEBHOOK_RETRY_SECONDS = float(os.getenv("WEBHOOK_RETRY_SECONDS", "10"))
WEBHOOK_TIMEOUT_SECONDS = float(os.getenv("WEBHOOK_TIMEOUT_SECONDS", "5"))
