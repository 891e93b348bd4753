"""A run may be asked for as soon as its claim is: it waits, queued, and starts the moment
the claim is applied (as `kubectl apply` of a Pod right after its claim), or ends failed when
the claim never will be. A real Celery worker and kubesim."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import connection, transaction

from claims.domain import services
from claims.domain.transitions import TaskToSend
from claims.models import AuditEvent, Cluster, VerificationRun
from tests.fixtures.portal import state_of, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_beat_process"),
]
CLAIM = {"name": "train", "device_class": "gpu.nvidia.com", "count": 1}


def claim_of(user: User, cluster: Cluster):  # type: ignore[no-untyped-def]
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"q-{uuid.uuid4().hex[:6]}"
    )
    return services.claim_request_submit(user=user, namespace_request=ns, **CLAIM)


def test_it_starts_a_run_queued_before_approval_once_the_claim_is_applied(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = claim_of(alice, cluster)
    run = services.verification_run_start(user=alice, claim_request=claim)
    assert run.state == "queued"
    assert "starts as soon as the claim is applied" in run.state_message

    services.claim_request_approve(user=carol, claim_request=claim)
    wait_until(lambda: state_of(run) == "succeeded", timeout=60)
    states = list(
        AuditEvent.objects.filter(object_kind="verification_run", object_id=run.pk).values_list(
            "to_state", flat=True
        )
    )
    assert states[:3] == ["queued", "creating", "pending"]
    assert VerificationRun.objects.get(pk=run.pk).passed is True


def test_it_fails_a_queued_run_when_the_claim_is_rejected(
    alice: User, carol: User, cluster: Cluster
) -> None:
    claim = claim_of(alice, cluster)
    run = services.verification_run_start(user=alice, claim_request=claim)

    services.claim_request_reject(user=carol, claim_request=claim, reason="Use team-a's GPUs.")
    run.refresh_from_db()
    assert run.state == "failed"
    assert run.state_message == "The claim was rejected: Use team-a's GPUs."
    assert run.finished_at is not None


def test_it_refuses_a_run_on_a_released_claim(alice: User, cluster: Cluster) -> None:
    claim = claim_of(alice, cluster)
    services.claim_request_release(user=alice, claim_request=claim)
    with pytest.raises(ValidationError) as excinfo:
        services.verification_run_start(user=alice, claim_request=claim)
    assert "released" in excinfo.value.message_dict[NON_FIELD_ERRORS][0]
    assert not VerificationRun.objects.filter(claim=claim).exists()


def started_with_tasks(user: User, claim: Any) -> tuple[VerificationRun, list[tuple]]:
    """A run started, and the start tasks it sends once its transaction commits."""
    with transaction.atomic():
        run = services.verification_run_start(user=user, claim_request=claim)
        sent = [entry[1] for entry in connection.run_on_commit]
    tasks = [c.args for c in sent if isinstance(c, TaskToSend) and "start_verif" in c.name]
    return run, tasks


def test_a_run_asked_for_before_its_claim_is_applied_sends_no_task_of_its_own(
    alice: User, carol: User, cluster: Cluster
) -> None:
    """The claim's task starts it (the claim's row orders the two): a task of the run's own
    would only find the claim not applied yet, a Celery round trip per run for nothing. On a
    claim applied already, the run's own task is what starts it."""
    claim = claim_of(alice, cluster)
    run, tasks = started_with_tasks(alice, claim)
    assert tasks == []

    services.claim_request_approve(user=carol, claim_request=claim)
    wait_until(lambda: state_of(run) == "succeeded", timeout=60)
    claim.refresh_from_db()
    again, tasks = started_with_tasks(alice, claim)
    assert tasks == [(again.pk,)]
    wait_until(lambda: state_of(again) == "succeeded", timeout=60)
