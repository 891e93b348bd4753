"""Change signals: a request that waits for an object to change wakes when it does.

A writer announces an object once its transaction commits (Redis pub/sub, one channel per
object, per parent and per owner). A waiter subscribes, then compares a version read from
the database with the one its client knows, so a message sent before it subscribed is not
lost. Redis is only a wake-up call: when it is down or not configured, waiters poll slowly.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings
from django.db import models, transaction
from django.db.models import Subquery

from claims.live import connections
from claims.models import (
    AuditEvent,
    ClaimRequest,
    NamespaceRequest,
    RunLog,
    VerificationRun,
    Workload,
    WorkloadLog,
)

log = logging.getLogger(__name__)

PREFIX = "portal:changed:"
# Everything anyone may see changed: what an approver's dashboard waits on.
EVERYTHING = PREFIX + "all"
# With Redis up, a waiter still reads the version this often, in case a message was lost. As
# long as the longest wait (an API long-poll's 60 s): a page's wait reads it again when it
# ends, and a reread mid-wait would open a database connection the waiter had given back.
RECHECK_SECONDS = 60.0
# How long a wait waits for Redis to confirm its subscription before its first look.
CONFIRM_SECONDS = 2.0
# A counter per scope channel (a user's things, everything), bumped with each announcement:
# what an idle dashboard compares instead of aggregating every row it could show.
VERSION_PREFIX = "portal:version:"
EPOCH_KEY = "portal:version-epoch"
# After Redis failed, publishers and waiters leave it alone this long (no connect per change).
REDIS_REST_SECONDS = 10.0


def channel(kind: str, pk: Any) -> str:
    return f"{PREFIX}{kind}:{pk}"


def channel_of(model: type[models.Model], pk: Any) -> str:
    kinds = {
        VerificationRun: "run",
        ClaimRequest: "claim",
        NamespaceRequest: "namespace",
        Workload: "workload",
    }
    return channel(kinds[model], pk)


def channels_of(obj: models.Model) -> list[str]:
    """Where a change to obj is announced: itself, the pages that show it, its owner."""
    if isinstance(obj, VerificationRun):
        own = [channel("run", obj.pk), channel("claim", obj.claim_id)]
    elif isinstance(obj, Workload):
        own = [channel("workload", obj.pk), channel("claim", obj.claim_id)]
    elif isinstance(obj, ClaimRequest):
        own = [channel("claim", obj.pk), channel("namespace", obj.namespace_request_id)]
    elif isinstance(obj, NamespaceRequest):
        own = [channel("namespace", obj.pk)]
    else:
        raise TypeError(f"no change channel for {type(obj).__name__}")
    return [*own, channel("user", obj.owner_id), EVERYTHING]


class Announcement:
    """The on-commit callback that publishes a change (a class, so it can be told from work)."""

    def __init__(self, channels: list[str], state: str = "") -> None:
        self.channels, self.state = channels, state

    def __call__(self) -> None:
        publish(self.channels, state=self.state)


def announce(obj: models.Model, *, state: str | None = None) -> None:
    """Wake whoever waits on obj once the surrounding transaction commits. The message on
    obj's own channel carries its state (`state` or obj's), so a waiter for other states
    need not read the database to know it waits on (see wait_for)."""
    known = getattr(obj, "state", "") if state is None else state
    transaction.on_commit(Announcement(channels_of(obj), state=known), robust=True)


def announce_deleted(sender: type, instance: models.Model, **kwargs: Any) -> None:
    """A post_delete receiver (ClaimsConfig.ready): a removed request or run is a change too
    (the admin deletes rows without a state change); no state: the waiter reads the row."""
    if isinstance(instance, NamespaceRequest | ClaimRequest | VerificationRun | Workload):
        announce(instance, state="")


STATE_PAYLOAD = "state="


def publish(channels: list[str], *, state: str = "") -> None:
    """The first channel is the object's own: its message says the state when known."""
    client = _client()
    if client is None:
        return
    try:
        with client.pipeline(transaction=False) as pipe:
            for index, name in enumerate(channels):
                payload = f"{STATE_PAYLOAD}{state}" if index == 0 and state else "1"
                pipe.publish(on_the_wire(client, name), payload)
                if _is_scope(name):
                    pipe.incr(VERSION_PREFIX + name)
            pipe.execute()
    except redis.RedisError as error:
        _rest(error)


def on_the_wire(client: redis.Redis, name: str) -> str:
    """A channel as published: Redis pub/sub spans every database of a server, so portals
    sharing one server on different databases (staging beside production, parallel test
    workers) must not wake each other's waiters."""
    return f"{name}@{client.connection_pool.connection_kwargs.get('db', 0)}"


def _is_scope(name: str) -> bool:
    return name == EVERYTHING or name.startswith(PREFIX + "user:")


def scope_version(name: str) -> str | None:
    """How many changes were announced on a scope channel so far, after an epoch that a
    restarted (emptied) Redis starts afresh, so a count never repeats one seen before; None
    without Redis (then only the database can say whether anything changed)."""
    client = _client()
    if client is None:
        return None
    try:
        epoch, count = client.mget(EPOCH_KEY, VERSION_PREFIX + name)
        if epoch is None:
            client.set(EPOCH_KEY, secrets.token_hex(8), nx=True)
            epoch, count = client.mget(EPOCH_KEY, VERSION_PREFIX + name)
    except redis.RedisError as error:
        _rest(error)
        return None
    return f"{_text(epoch)}:{_text(count) or '0'}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


# Versions: the newest change a page shows, in microseconds. Every write of a row shown sets
# its `updated` (or adds an event row), so a version only grows while the page's rows change.


def _newest(*columns: models.QuerySet) -> int:
    """Newest timestamp over one-column querysets, in one query: each a scalar subquery
    beside the first (SQLite refuses LIMIT inside a UNION, so no union of sliced queries)."""
    first, *others = columns
    newest = {
        f"newest_{index}": Subquery(qs.order_by(f"-{qs.query.values_select[0]}")[:1])
        for index, qs in enumerate(others)
    }
    row = first.annotate(**newest).values_list(first.query.values_select[0], *newest).first()
    stamps = [stamp for stamp in row or () if stamp is not None]
    return int(max(stamps).timestamp() * 1_000_000) if stamps else 0


def _events(kind: str, pk: int) -> models.QuerySet:
    return AuditEvent.objects.filter(object_kind=kind, object_id=pk).values_list(
        "created", flat=True
    )


def claim_version(pk: int) -> int:
    return _newest(
        ClaimRequest.objects.filter(pk=pk).values_list("updated", flat=True),
        VerificationRun.objects.filter(claim_id=pk).values_list("updated", flat=True),
        Workload.objects.filter(claim_id=pk).values_list("updated", flat=True),
        _events(AuditEvent.Kind.CLAIM_REQUEST, pk),
    )


def run_version(pk: int) -> int:
    return _newest(
        VerificationRun.objects.filter(pk=pk).values_list("updated", flat=True),
        RunLog.objects.filter(run_id=pk).values_list("updated", flat=True),
        _events(AuditEvent.Kind.VERIFICATION_RUN, pk),
    )


def workload_version(pk: int) -> int:
    return _newest(
        Workload.objects.filter(pk=pk).values_list("updated", flat=True),
        WorkloadLog.objects.filter(workload_id=pk).values_list("updated", flat=True),
        _events(AuditEvent.Kind.WORKLOAD, pk),
    )


def namespace_version(pk: int) -> int:
    return _newest(
        NamespaceRequest.objects.filter(pk=pk).values_list("updated", flat=True),
        ClaimRequest.objects.filter(namespace_request_id=pk).values_list("updated", flat=True),
        _events(AuditEvent.Kind.NAMESPACE_REQUEST, pk),
    )


def wait_for(
    channels: list[str],
    changed: Callable[[], bool],
    *,
    seconds: float,
    poll_seconds: float | None = None,
    still_waits_in: Callable[[str], bool] | None = None,
) -> bool:
    """True as soon as changed() is, False once `seconds` passed without.

    changed() is read after each message on the channels; without Redis every poll_seconds.
    A message that carries a state in which still_waits_in says the wait goes on is not
    checked against the database (a run's long-poll wakes at every log line: each a query).
    A message may be lost, so a wait still reads the database every RECHECK_SECONDS, but not
    as its time runs out: the client asks again, and that request reads it first. So an idle
    page's wait reads the database once (after subscribing, so no change slips between).
    While it listens to Redis, the waiter holds no database connection (see next_signal).
    """
    deadline = time.monotonic() + seconds
    poll = poll_seconds or settings.LIVE_FALLBACK_POLL_SECONDS
    with _subscription(channels, poll) as next_signal:
        payload = None
        while True:
            if not _says_it_still_waits(payload, still_waits_in) and changed():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            payload = next_signal(remaining)
            if payload is None and time.monotonic() >= deadline:
                return False


def _says_it_still_waits(payload: str | None, still_waits_in: Callable[[str], bool] | None) -> bool:
    if payload is None or still_waits_in is None or not payload.startswith(STATE_PAYLOAD):
        return False
    return still_waits_in(payload[len(STATE_PAYLOAD) :])


def wait_in_turn(
    user_key: Any,
    channels: list[str],
    changed: Callable[[], bool],
    *,
    seconds: float,
    poll_seconds: float | None = None,
    still_waits_in: Callable[[str], bool] | None = None,
) -> bool | None:
    """wait_for within the bounds on waiting requests (each holds a web thread): None at once
    when the process or this user already has as many waiting as allowed; the caller answers
    and the client asks again later."""
    with waiters.slot(user_key) as may_wait:
        if not may_wait:
            return None
        return wait_for(
            channels,
            changed,
            seconds=seconds,
            poll_seconds=poll_seconds,
            still_waits_in=still_waits_in,
        )


@contextmanager
def _subscription(
    channels: list[str], poll_seconds: float
) -> Iterator[Callable[[float], str | None]]:
    """A function that returns the next message's payload (None after a while without one,
    or without Redis)."""
    client = _client()
    pubsub = client.pubsub() if client is not None else None
    try:
        if client is not None and pubsub is not None:
            wire = {on_the_wire(client, name) for name in channels}
            pubsub.subscribe(*wire)
            _confirmed(pubsub, len(wire))
    except redis.RedisError as error:
        _rest(error)
        pubsub = None

    def next_signal(remaining: float) -> str | None:
        nonlocal pubsub
        # Each open page keeps a request waiting, for up to a minute: more of them than a
        # process's pool of connections. The next query borrows one again.
        connections.release()
        if pubsub is None:
            time.sleep(min(remaining, poll_seconds))
            return None
        until = time.monotonic() + min(remaining, RECHECK_SECONDS)
        try:
            while (left := until - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=left)
                if message is not None and message["type"] == "message":
                    return _text(message["data"])
        except redis.RedisError as error:
            _rest(error)
            pubsub = None
        return None

    try:
        yield next_signal
    finally:
        if pubsub is not None:
            pubsub.close()


def _confirmed(pubsub: Any, channels: int) -> None:
    """Wait until Redis confirms each channel's subscription: the wait's first look at the
    database comes after it, so a change announced in between is not missed (it is seen by
    that look, or heard as a message)."""
    deadline = time.monotonic() + CONFIRM_SECONDS
    while channels and (left := deadline - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=left)
        if message is not None and message["type"] == "subscribe":
            channels -= 1


_resting_until = 0.0


def _client() -> redis.Redis | None:
    if not settings.REDIS_URL or time.monotonic() < _resting_until:
        return None
    return _client_for(settings.REDIS_URL)


@lru_cache(maxsize=4)
def _client_for(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2)


def _rest(error: Exception) -> None:
    global _resting_until
    _resting_until = time.monotonic() + REDIS_REST_SECONDS
    log.warning("Redis unavailable for change signals (polling instead): %s", error)


class Waiters:
    """How many requests wait at once, in all and per user: a waiter holds a web thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_user: Counter[Any] = Counter()

    def waiting(self) -> int:
        with self._lock:
            return self._per_user.total()

    @contextmanager
    def slot(self, user_key: Any) -> Iterator[bool]:
        """True if this request may wait; False: answer at once (the client polls later)."""
        with self._lock:
            allowed = (
                self._per_user.total() < settings.LIVE_WAITERS_MAX
                and self._per_user[user_key] < settings.LIVE_WAITERS_PER_USER
            )
            if allowed:
                self._per_user[user_key] += 1
        try:
            yield allowed
        finally:
            if allowed:
                with self._lock:
                    self._per_user[user_key] -= 1
                    if self._per_user[user_key] <= 0:
                        del self._per_user[user_key]


waiters = Waiters()
