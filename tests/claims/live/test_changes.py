"""Change signals: announced on commit, a version that grows, waiters woken and bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test.utils import override_settings

from claims.domain import observations, run_observations, services
from claims.live import changes
from claims.models import ClaimRequest, VerificationRun
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.fixtures.kubesim import wait_until

OnCommit = Callable[..., object]


@pytest.fixture(autouse=True)
def redis_not_resting() -> Iterator[None]:
    """A test that makes Redis fail must not leave the others without signals."""
    yield
    changes._resting_until = 0.0


@pytest.fixture
def subscriber(claim: ClaimRequest) -> Iterator[redis.client.PubSub]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(changes.on_the_wire(client, changes.channel("claim", claim.pk)))
    yield pubsub
    pubsub.close()


def next_message(pubsub: redis.client.PubSub, seconds: float = 10) -> dict | None:
    """The next published message (the subscription's own confirmation is skipped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=deadline - time.monotonic())
        if message is not None:
            return message
    return None


def test_it_announces_a_change_only_once_it_commits(
    claim: ClaimRequest,
    charlie: User,
    subscriber: redis.client.PubSub,
    django_capture_on_commit_callbacks: OnCommit,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.claim_request_approve(user=charlie, claim_request=claim)
    assert callbacks, "nothing waits for the commit"
    for callback in callbacks:
        callback()
    message = next_message(subscriber)
    assert message is not None
    db = settings.REDIS_URL.rsplit("/", 1)[1]
    assert message["channel"] == f"{changes.channel('claim', claim.pk)}@{db}".encode()


def test_a_portal_on_another_redis_database_wakes_nobody_here(
    claim: ClaimRequest, subscriber: redis.client.PubSub
) -> None:
    """Pub/sub spans the server's databases: a staging portal on database n+1 changing its
    claim with the same id must not wake this portal's waiters."""
    here = settings.REDIS_URL
    elsewhere = here.rsplit("/", 1)[0] + f"/{int(here.rsplit('/', 1)[1]) + 1}"
    with override_settings(REDIS_URL=elsewhere):
        changes.publish([changes.channel("claim", claim.pk)])
    changes.publish([changes.channel("claim", claim.pk)])
    # Redis delivers in order: had the other database's message arrived, it would be first.
    first = next_message(subscriber)
    assert first is not None and first["channel"].endswith(f"@{here.rsplit('/', 1)[1]}".encode())


def test_it_announces_to_the_pages_that_show_the_object(claim: ClaimRequest) -> None:
    run = VerificationRun(pk=7, claim=claim, owner=claim.owner)
    assert changes.channels_of(run) == [
        changes.channel("run", 7),
        changes.channel("claim", claim.pk),
        changes.channel("user", claim.owner_id),
        changes.EVERYTHING,
    ]
    assert changes.channel("namespace", claim.namespace_request_id) in changes.channels_of(claim)


def test_it_grows_the_version_with_each_change(claim: ClaimRequest, charlie: User) -> None:
    seen = [changes.claim_version(claim.pk)]
    services.claim_request_approve(user=charlie, claim_request=claim)
    seen.append(changes.claim_version(claim.pk))
    observations.claim_applying(claim_request=claim)
    seen.append(changes.claim_version(claim.pk))
    assert seen == sorted(seen)
    assert len(set(seen)) == 3


def test_it_grows_the_page_versions_with_what_they_show(claim: ClaimRequest, charlie: User) -> None:
    namespace_before = changes.namespace_version(claim.namespace_request_id)
    claim_before = changes.claim_version(claim.pk)
    run = VerificationRun.objects.create(claim=claim, owner=claim.owner, pod_name="p")
    run_before = changes.run_version(run.pk)
    now = datetime.now(UTC)
    run_observations.run_logs_appended(run=run, container="ctr0", lines=[(now, "hello\n")])
    services.claim_request_reject(user=charlie, claim_request=claim, reason="No budget")
    assert changes.run_version(run.pk) > run_before
    assert changes.claim_version(claim.pk) > claim_before
    assert changes.namespace_version(claim.namespace_request_id) > namespace_before


def waits_until_approved(claim: ClaimRequest, approver: User, seconds: float) -> bool:
    """wait_for on the claim's channel in a thread, approving the claim once it looks."""
    known = changes.claim_version(claim.pk)
    outcome: list[bool] = []
    waiting = threading.Event()

    def wait() -> None:
        def changed() -> bool:
            waiting.set()
            return changes.claim_version(claim.pk) != known

        channels = [changes.channel("claim", claim.pk)]
        outcome.append(changes.wait_for(channels, changed, seconds=seconds))
        connection.close()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(timeout=30)
    services.claim_request_approve(user=approver, claim_request=claim)
    waiter.join(timeout=60)
    return outcome == [True]


@pytest.mark.django_db(transaction=True)
def test_it_wakes_a_waiter_on_the_signal(
    claim: ClaimRequest, charlie: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rechecks so rare that only the message can wake the waiter in time.
    monkeypatch.setattr(changes, "RECHECK_SECONDS", 120)
    assert waits_until_approved(claim, charlie, seconds=100)


@pytest.mark.django_db(transaction=True)
@override_settings(REDIS_URL="redis://127.0.0.1:1/0", LIVE_FALLBACK_POLL_SECONDS=0.1)
def test_it_works_without_redis(claim: ClaimRequest, charlie: User) -> None:
    assert waits_until_approved(claim, charlie, seconds=60)  # the approval publishes to nowhere


@pytest.mark.django_db(transaction=True)
def test_it_holds_no_database_connection_while_it_waits(claim: ClaimRequest, charlie: User) -> None:
    """Hundreds of open pages wait at once: more than PostgreSQL has connections for."""
    known = changes.claim_version(claim.pk)
    waiters_connection: list[Any] = []  # the waiting thread's (Django's are per thread)
    outcome: list[bool] = []

    def wait() -> None:
        def changed() -> bool:
            version = changes.claim_version(claim.pk)
            waiters_connection.append(connections["default"])  # holding one, as it just read
            return version != known

        channels = [changes.channel("claim", claim.pk)]
        outcome.append(changes.wait_for(channels, changed, seconds=100))
        connection.close()

    waiter = threading.Thread(target=wait)
    waiter.start()
    # Given back (to the pool) once it looked, while it waits.
    wait_until(lambda: waiters_connection and waiters_connection[0].connection is None, timeout=30)
    services.claim_request_approve(user=charlie, claim_request=claim)
    waiter.join(timeout=60)
    assert outcome == [True]  # woken, it read the version on a connection borrowed again


def test_it_keeps_the_connection_of_a_transaction_while_it_waits(claim: ClaimRequest) -> None:
    assert connection.in_atomic_block  # the test's own transaction
    changes.wait_for([changes.channel("claim", claim.pk)], lambda: False, seconds=0.2)
    assert ClaimRequest.objects.filter(pk=claim.pk).exists()  # nothing rolled back or lost


def test_it_gives_up_waiting_when_nothing_changes() -> None:
    assert changes.wait_for([changes.channel("claim", 0)], lambda: False, seconds=0.2) is False


@override_settings(LIVE_WAITERS_MAX=2, LIVE_WAITERS_PER_USER=1)
def test_it_bounds_the_waiters_per_user_and_in_all() -> None:
    waiters = changes.Waiters()
    with (
        waiters.slot("alice") as first,
        waiters.slot("alice") as second,
        waiters.slot("bob") as bobs,
        waiters.slot("carol") as carols,
    ):
        assert (first, second, bobs, carols) == (True, False, True, False)
    with waiters.slot("alice") as again, waiters.slot("carol") as carols:
        assert (again, carols) == (True, True)


def test_it_counts_the_changes_of_a_scope_after_an_epoch(
    claim: ClaimRequest, charlie: User, django_capture_on_commit_callbacks: OnCommit
) -> None:
    owner_scope = changes.channel("user", claim.owner_id)
    before = changes.scope_version(owner_scope)
    with django_capture_on_commit_callbacks(execute=True):
        services.claim_request_approve(user=charlie, claim_request=claim)
    after = changes.scope_version(owner_scope)
    assert before is not None and after is not None
    epoch, count = after.split(":")
    assert before.split(":")[0] == epoch and int(count) > int(before.split(":")[1])
    # An emptied Redis (restarted) starts a new epoch: no count seen before comes again.
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(changes.EPOCH_KEY, changes.VERSION_PREFIX + owner_scope)
    renewed = changes.scope_version(owner_scope)
    assert renewed is not None and renewed.split(":")[0] != epoch


def test_it_has_no_scope_version_without_redis() -> None:
    with override_settings(REDIS_URL=""):
        assert changes.scope_version(changes.EVERYTHING) is None


@pytest.mark.django_db(transaction=True)
def test_it_announces_a_request_removed_without_a_state_change(
    claim: ClaimRequest, subscriber: redis.client.PubSub
) -> None:
    claim.delete()  # as the admin deletes a row: no state change, no transition
    assert next_message(subscriber) is not None


def test_the_objects_own_channel_is_told_its_state(
    claim: ClaimRequest,
    charlie: User,
    subscriber: redis.client.PubSub,
    django_capture_on_commit_callbacks: OnCommit,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        services.claim_request_approve(user=charlie, claim_request=claim)
    message = next_message(subscriber)
    assert message is not None and message["data"] == b"state=approved"


def test_a_wait_reads_the_database_only_for_a_state_it_may_end_in(claim: ClaimRequest) -> None:
    """A run's long-poll wakes at each log line; the state in the message tells it to go on
    waiting without a query, and a state it waits for is checked in the database."""
    own = changes.channel("claim", claim.pk)
    client = redis.Redis.from_url(settings.REDIS_URL)
    checks: list[str] = []

    def publish_when_subscribed() -> None:
        wire = changes.on_the_wire(client, own)
        wait_until(lambda: client.pubsub_numsub(wire)[0][1], timeout=10)
        for state in ("running", "running", "running"):
            changes.publish([own], state=state)
        changes.publish([own])  # a change that names no state: checked
        changes.publish([own], state="succeeded")

    def changed() -> bool:
        checks.append("read")
        return False  # the database disagrees with every message: the wait runs to its end

    publisher = threading.Thread(target=publish_when_subscribed)
    publisher.start()
    ended = changes.wait_for(
        [own], changed, seconds=2, still_waits_in=lambda state: state != "succeeded"
    )
    publisher.join()
    assert ended is False
    # At the start, for the message without a state and for "succeeded": none for the three
    # that say "running", nor at the subscription's confirmation or the end of the wait.
    assert len(checks) == 3


def test_an_idle_wait_reads_the_database_once() -> None:
    """Once subscribed, not again as its time runs out: the client's next request looks."""
    looks: list[int] = []

    def changed() -> bool:
        looks.append(1)
        return False

    assert changes.wait_for([changes.channel("claim", 0)], changed, seconds=0.3) is False
    assert len(looks) == 1


def test_a_waits_first_look_comes_once_redis_holds_its_subscription(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A change announced between the look and the subscription would otherwise go unheard
    until the wait ends. Here the subscription reaches Redis late, as under load."""
    own = changes.channel("claim", 0)
    client = redis.Redis.from_url(settings.REDIS_URL)
    wire = changes.on_the_wire(client, own)
    subscribe = redis.client.PubSub.subscribe

    def late(self: Any, *args: Any, **kwargs: Any) -> None:
        threading.Timer(0.3, subscribe, (self, *args)).start()

    monkeypatch.setattr(redis.client.PubSub, "subscribe", late)
    subscribers_at_first_look: list[int] = []

    def changed() -> bool:
        if not subscribers_at_first_look:
            subscribers_at_first_look.append(client.pubsub_numsub(wire)[0][1])
        return False

    changes.wait_for([own], changed, seconds=1)
    assert subscribers_at_first_look == [1]
