"""Quota and auto-approval are decided under the team's row lock: 20 parallel submits (threads,
each with its own PostgreSQL connection) for the last unit of a quota."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from claims.domain import services
from claims.domain.transitions import transition
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team, TeamQuota

pytestmark = pytest.mark.django_db(transaction=True)
GPU = "gpu.nvidia.com"


def submit_one(ns_pk: int, user_pk: int, index: int) -> str:
    try:
        ns = NamespaceRequest.objects.select_related("cluster").get(pk=ns_pk)
        services.claim_request_submit(
            user=User.objects.get(pk=user_pk),
            namespace_request=ns,
            name=f"c{index}",
            device_class=GPU,
            count=1,
        )
        return "accepted"
    except ValidationError as error:
        return error.message_dict["count"][0]
    finally:
        connection.close()


def race(alice: User, *, max_devices: int, auto_approve: bool) -> NamespaceRequest:
    inventory = {"device_classes": [{"name": GPU, "selectors": []}], "device_counts": {GPU: 8}}
    cluster = Cluster.objects.create(name="race", inventory=inventory)
    team = Team.objects.create(name="race", auto_approve=auto_approve)
    team.members.add(alice)
    TeamQuota.objects.create(team=team, cluster=cluster, device_class=GPU, max_devices=max_devices)
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="race")
    transition(ns, to="active", allowed=("pending",))
    return ns


def run_twenty(ns: NamespaceRequest, alice: User) -> list[str]:
    with ThreadPoolExecutor(max_workers=20) as pool:
        return list(pool.map(lambda i: submit_one(ns.pk, alice.pk, i), range(20)))


def test_twenty_parallel_submits_for_the_last_unit_let_exactly_one_through(alice: User) -> None:
    ns = race(alice, max_devices=3, auto_approve=False)
    for held in ("held-1", "held-2"):
        services.claim_request_submit(
            user=alice, namespace_request=ns, name=held, device_class=GPU, count=1
        )
    results = run_twenty(ns, alice)
    assert results.count("accepted") == 1
    refusals = [result for result in results if result != "accepted"]
    assert set(refusals) == {
        "Team race may hold 3 gpu.nvidia.com device(s) on race; 3 are already held or asked "
        "for, so at most 0 more."
    }
    assert ClaimRequest.objects.count() == 3


def test_twenty_parallel_auto_approved_submits_fit_a_quota_of_two_exactly(alice: User) -> None:
    ns = race(alice, max_devices=2, auto_approve=True)
    results = run_twenty(ns, alice)
    assert results.count("accepted") == 2
    assert ClaimRequest.objects.filter(state="approved").count() == 2
    assert ClaimRequest.objects.count() == 2


def test_a_team_without_a_limit_does_not_queue_its_submits_on_its_row(alice: User) -> None:
    """Nothing is counted without a limit, so a submit does not wait for the team's row: held
    locked by another transaction (as a quota edit holds it), a submit still goes through,
    while one under a limit waits for the lock to be let go."""
    ns = race(alice, max_devices=8, auto_approve=True)
    TeamQuota.objects.filter(team__name="race").update(max_devices=None)
    locked = threading.Event()
    release = threading.Event()

    def hold_the_team_row() -> None:
        try:
            with transaction.atomic():
                Team.objects.select_for_update().get(name="race")
                locked.set()
                release.wait(60)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        holder = pool.submit(hold_the_team_row)
        assert locked.wait(60)
        try:
            assert pool.submit(submit_one, ns.pk, alice.pk, 1).result(timeout=60) == "accepted"
            TeamQuota.objects.filter(team__name="race").update(max_devices=8)
            limited = pool.submit(submit_one, ns.pk, alice.pk, 2)
            with pytest.raises(TimeoutError):
                limited.result(timeout=1)  # waits on the lock: a bound, not a measure
        finally:
            release.set()
        assert limited.result(timeout=60) == "accepted"
        holder.result(timeout=60)
    assert ClaimRequest.objects.filter(state="approved").count() == 2
