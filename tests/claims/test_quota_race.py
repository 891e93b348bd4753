"""Quota and auto-approval are decided under a lock: 20 parallel submits for a quota of 2."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection

from claims import services
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Team
from claims.transitions import transition

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
    except ValidationError:
        return "refused"
    finally:
        connection.close()


def test_twenty_parallel_submits_fit_a_quota_of_two_exactly(alice: User) -> None:
    inventory = {"device_classes": [{"name": GPU, "selectors": []}], "device_counts": {GPU: 8}}
    cluster = Cluster.objects.create(name="race", inventory=inventory)
    team = Team.objects.create(name="race", gpu_quota=2, auto_approve=True)
    team.members.add(alice)
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="race")
    transition(ns, to="active", allowed=("pending",))
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda i: submit_one(ns.pk, alice.pk, i), range(20)))
    assert results.count("accepted") == 2
    assert ClaimRequest.objects.filter(state="approved").count() == 2
    assert ClaimRequest.objects.count() == 2


def test_approval_checks_the_quota_again(alice: User, carol: User) -> None:
    inventory = {"device_classes": [{"name": GPU, "selectors": []}], "device_counts": {GPU: 8}}
    cluster = Cluster.objects.create(name="shrunk", inventory=inventory)
    team = Team.objects.create(name="shrunk", gpu_quota=4)
    team.members.add(alice)
    ns = NamespaceRequest.objects.create(owner=alice, cluster=cluster, name="shrunk")
    transition(ns, to="active", allowed=("pending",))
    claim = services.claim_request_submit(
        user=alice, namespace_request=ns, name="big", device_class=GPU, count=3
    )
    Team.objects.filter(pk=team.pk).update(gpu_quota=2)  # the admin lowered it since
    with pytest.raises(ValidationError) as refused:
        services.claim_request_approve(user=carol, claim_request=claim)
    assert "Over the quota now" in str(refused.value)
    assert ClaimRequest.objects.get(pk=claim.pk).state == "pending"
