"""Settings of the background work: Redis, Celery and its beat, each cluster's follower loop
and what /readyz checks, and the live pages' waits for Redis's change signals."""

import os

from portal.beat_schedule import beat_schedule
from portal.env import VAR_DIR, envbool, envint

# Celery: Redis when REDIS_URL is set, otherwise a broker in a SQLite file that needs no
# server (kombu's SQLAlchemy transport: a message is a row, so a reader never sees half of it).
REDIS_URL = os.getenv("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
# Live pages and API long-polls wait for a change signal (Redis pub/sub) up to this long (under
# the Ingress's read timeout, 90 s, as the API's 60 s). Each waiting request holds a web thread
# (but no database connection), so a process lets only so many wait (in all, per user); beyond
# that a request answers at once and its client asks again later. An open page costs a request
# per wait: 200 open pages fit two processes. Without Redis, waiters look at the database this
# often instead. 112 of gunicorn's 128 threads (deploy/, Dockerfile, compose): 16 stay for the
# requests that do not wait.
LIVE_WAIT_SECONDS = float(os.getenv("LIVE_WAIT_SECONDS", "55"))
LIVE_WAITERS_MAX = envint("LIVE_WAITERS_MAX", "112")
LIVE_WAITERS_PER_USER = envint("LIVE_WAITERS_PER_USER", "16")
LIVE_FALLBACK_POLL_SECONDS = float(os.getenv("LIVE_FALLBACK_POLL_SECONDS", "2"))
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL") or REDIS_URL
if not CELERY_BROKER_URL:
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = f"sqlite:///{BROKER_DIR / 'broker.sqlite3'}"
    CELERY_BROKER_TRANSPORT = "portal.celery:SQLiteBroker"
    # Wait for the lock rather than fail while another process writes.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
CELERY_TASK_DEFAULT_QUEUE = os.getenv("CELERY_QUEUE", "portal")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery closes the database connections around every task unless told to reuse them: a new
# PostgreSQL session (a server process) per task. Reused, they are tidied as Django tidies a
# request's (portal/celery.py), and renewed by Celery after twice this many tasks.
CELERY_DB_REUSE_MAX = envint("CELERY_DB_REUSE_MAX", "500")
if CELERY_BROKER_URL.startswith("sqlite:"):
    # Celery acks a polling transport's messages only between 2 s waits for more: with one
    # message per thread reserved, the worker would stall that long whenever all are taken.
    CELERY_WORKER_PREFETCH_MULTIPLIER = 16
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
# Workers log through LOGGING below (JSON in production), not Celery's own handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Beat's reconciler looks for work whose message was lost this often; each cluster's loop
# (manage.py follow_clusters) compares the cluster with the database from its caches as often,
# and sweeps orphans from them every ORPHAN_SWEEP_INTERVAL_SECONDS.
RECONCILE_INTERVAL_SECONDS = float(os.getenv("RECONCILE_INTERVAL_SECONDS", "20"))
ORPHAN_SWEEP_INTERVAL_SECONDS = float(os.getenv("ORPHAN_SWEEP_INTERVAL_SECONDS", "600"))
# The lease of a cluster's loop runs this long unless renewed (a standby takes over then).
FOLLOWER_LEASE_SECONDS = float(os.getenv("FOLLOWER_LEASE_SECONDS", "15"))
# /readyz (portal/health.py): the database and Redis must answer within the timeout, and,
# with READYZ_CHECK_FOLLOWERS, every cluster must have a live loop.
READYZ_TIMEOUT_SECONDS = float(os.getenv("READYZ_TIMEOUT_SECONDS", "2"))
READYZ_CHECK_FOLLOWERS = envbool("READYZ_CHECK_FOLLOWERS", "True")
# How long one watch request lasts before the loop resumes it (servers cap it too).
FOLLOWER_WATCH_SECONDS = envint("FOLLOWER_WATCH_SECONDS", "300")
# A list or watch the cluster refuses (401/403) is asked again after 1/16 of this, doubling up
# to this (seconds): a refusal lasts until an admin grants the permission.
FOLLOWER_REFUSED_RETRY_SECONDS = float(os.getenv("FOLLOWER_REFUSED_RETRY_SECONDS", "300"))
CELERY_BEAT_SCHEDULE = beat_schedule(
    reconcile_seconds=RECONCILE_INTERVAL_SECONDS,
    expiry_seconds=float(os.getenv("EXPIRY_INTERVAL_SECONDS", "60")),
)
