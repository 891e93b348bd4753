"""Claims with alternatives (issue 25.2) before approvers: the approval queue's class filter
finds a claim by any of its alternatives, and an auto-approval rule limited to a class approves
only a claim whose every alternative is of that class, within its device limit (the scheduler
may allocate any alternative)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from claims.models import ApprovalRule, NamespaceRequest, Team, TeamQuota
from claims.read import approval_queue
from claims.read.approval_queue import QueueFilter
from tests.claims.policy.test_rules import (  # noqa: F401 (fixtures)
    GPU,
    MIG,
    cluster,
    ns,
    submit,
    team,
)


def either(user: User, namespace: NamespaceRequest, name: str, *further: dict[str, Any]) -> Any:
    return submit(user, namespace, name, count=1, alternatives=list(further))


def test_a_class_rule_approves_only_when_every_alternative_is_of_its_class(
    team: Team,  # noqa: F811
    alice: User,
    ns: NamespaceRequest,  # noqa: F811
) -> None:
    TeamQuota.objects.filter(team=team).update(max_devices=20)  # the rules decide here
    ApprovalRule.objects.create(name="small-gpu", device_class=GPU, max_devices=2, team=team)

    assert either(alice, ns, "gpu-else-gpu", {"device_class": GPU, "count": 2}).state == "approved"
    # A MIG slice is not what the GPU rule allows: an approver decides.
    assert either(alice, ns, "gpu-else-mig", {"device_class": MIG}).state == "pending"
    # The largest alternative is what the claim can get: 3 is beyond the rule's 2.
    assert either(alice, ns, "gpu-else-3", {"device_class": GPU, "count": 3}).state == "pending"

    ApprovalRule.objects.create(name="any-small", max_devices=1, team=team)
    assert either(alice, ns, "mixed", {"device_class": MIG}).state == "approved"


def test_the_class_filter_finds_a_claim_by_any_alternative(
    alice: User,
    carol: User,
    ns: NamespaceRequest,  # noqa: F811
) -> None:
    mixed = either(alice, ns, "gpu-else-mig", {"device_class": MIG})
    plain = submit(alice, ns, "plain-gpu")
    assert (mixed.state, plain.state) == ("pending", "pending")

    def shown(device_class: str) -> set[str]:
        found = approval_queue.approval_queue(
            user=carol, shown=QueueFilter(device_class=device_class)
        )
        return {claim.name for claim in found["claims"]}

    assert shown(MIG) == {"gpu-else-mig"}
    assert shown(GPU) == {"gpu-else-mig", "plain-gpu"}
    assert shown("other.example.com") == set()
