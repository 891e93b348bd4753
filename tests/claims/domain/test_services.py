"""Every state change a user asks for: permissions, allowed and forbidden transitions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError

from claims.domain import services
from claims.domain.transitions import transition
from claims.kube.parsing import DeviceClassInfo, DeviceInfo
from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest, VerificationRun
from claims.read.inventory import build_inventory
from claims.read.selectors import events_for
from tests.fixtures.portal import work_sent

GPU = "gpu.nvidia.com"
GPU_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
MIG_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
)


def h100(index: int) -> DeviceInfo:
    attributes = {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3"}
    return DeviceInfo("node-1", GPU, "node-1", f"gpu-{index}", attributes, {"memory": "80Gi"})


@pytest.fixture
def cluster(db: None) -> Cluster:
    """A cluster as the last sync saw it: two H100s, no MIG devices."""
    classes = [
        DeviceClassInfo(GPU, [GPU_SELECTOR]),
        DeviceClassInfo("mig.nvidia.com", [MIG_SELECTOR]),
    ]
    inventory = build_inventory(classes, [h100(0), h100(1)])
    return Cluster.objects.create(
        name="lab", simulated=True, preferred_resource_version="v1", inventory=inventory
    )


@pytest.fixture
def namespace(alice: User, cluster: Cluster) -> NamespaceRequest:
    return services.namespace_request_submit(user=alice, cluster=cluster, name="team-a")


def submit_claim(user: User, namespace: NamespaceRequest, **fields: object) -> ClaimRequest:
    values: dict = {"name": "train", "device_class": GPU, "count": 1} | fields
    return services.claim_request_submit(user=user, namespace_request=namespace, **values)


def errors_of(excinfo: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return excinfo.value.message_dict


def states(obj: NamespaceRequest | ClaimRequest | VerificationRun) -> list[tuple[str, str]]:
    return [(e.from_state, e.to_state) for e in events_for(obj)]


def test_it_records_a_namespace_request_as_pending(alice: User, cluster: Cluster) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="team-a", purpose="x")
    assert ns.state == "pending"
    assert ns.owner == alice
    assert states(ns) == [("", "pending")]
    ns.refresh_from_db()
    assert ns.state_message == "Requested. Waiting for an approver."


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Team-A", "lower-case"),
        ("team_a", "'_'"),
        ("-team", "Start with"),
        ("team-", "End with"),
        ("a" * 64, "At most 63"),
        ("", "Enter a name"),
        ("kube-system", "belongs to the cluster itself"),
        ("default", "belongs to the cluster itself"),
        ("gpu-operator", "belongs to the cluster itself"),
        ("nvidia-dra-driver-gpu", "belongs to the cluster itself"),
    ],
)
def test_it_explains_why_a_namespace_name_is_bad(
    alice: User, cluster: Cluster, name: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as excinfo:
        services.namespace_request_submit(user=alice, cluster=cluster, name=name)
    assert reason in errors_of(excinfo)["name"][0]
    assert not NamespaceRequest.objects.exists()


def test_it_refuses_a_duplicate_namespace(namespace: NamespaceRequest, bob: User) -> None:
    with pytest.raises(ValidationError) as excinfo:
        services.namespace_request_submit(user=bob, cluster=namespace.cluster, name="team-a")
    assert "already requested" in errors_of(excinfo)["name"][0]


def test_it_allows_a_rejected_name_again(namespace: NamespaceRequest, carol: User) -> None:
    services.namespace_request_reject(user=carol, namespace_request=namespace, reason="no")
    again = services.namespace_request_submit(
        user=namespace.owner, cluster=namespace.cluster, name="team-a"
    )
    assert again.state == "pending"


def test_it_requires_a_login(cluster: Cluster) -> None:
    with pytest.raises(PermissionDenied):
        services.namespace_request_submit(user=AnonymousUser(), cluster=cluster, name="x")


def test_it_touches_nothing_before_approval(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.namespace_request_submit(user=alice, cluster=namespace.cluster, name="team-b")
        submit_claim(alice, namespace)
    assert work_sent(callbacks) == []


def test_it_records_a_claim_request(namespace: NamespaceRequest, alice: User) -> None:
    claim = submit_claim(
        alice, namespace, selector="device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )
    assert claim.state == "pending"
    assert claim.count == 1
    assert states(claim) == [("", "pending")]
    claim.refresh_from_db()
    assert claim.state_message == "Requested. Waiting for an approver."


def test_it_accepts_all_devices_without_a_count(namespace: NamespaceRequest, alice: User) -> None:
    claim = submit_claim(alice, namespace, count=None, all_devices=True)
    assert claim.all_devices and claim.count is None


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"device_class": "tpu.example.com"}, "device_class", "not a device class"),
        ({"count": 0}, "count", "at least 1"),
        ({"count": 3}, "count", "has 2 device(s)"),
        ({"count": None}, "count", "how many"),
        (
            {"device_class": "mig.nvidia.com"},
            "device_class",
            "has no device of class mig.nvidia.com",
        ),
        ({"name": "Train"}, "name", "lower-case"),
        ({"selector": "device.attributes["}, "selector", "Not a valid CEL"),
    ],
)
def test_it_explains_what_is_wrong_with_a_claim(
    namespace: NamespaceRequest, alice: User, fields: dict, field: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as excinfo:
        submit_claim(alice, namespace, **fields)
    assert reason in errors_of(excinfo)[field][0]
    assert not ClaimRequest.objects.exists()


def test_it_refuses_a_double_submit(namespace: NamespaceRequest, alice: User) -> None:
    submit_claim(alice, namespace)
    with pytest.raises(ValidationError) as excinfo:
        submit_claim(alice, namespace)
    assert "already exists" in errors_of(excinfo)["name"][0]
    assert ClaimRequest.objects.count() == 1


def test_it_says_when_the_device_classes_are_not_known_yet(alice: User, db: None) -> None:
    empty = Cluster.objects.create(name="new")
    ns = services.namespace_request_submit(user=alice, cluster=empty, name="team-a")
    with pytest.raises(ValidationError) as excinfo:
        submit_claim(alice, ns)
    assert "not known yet" in errors_of(excinfo)["device_class"][0]


def test_it_keeps_others_out_of_my_namespace(namespace: NamespaceRequest, bob: User) -> None:
    with pytest.raises(PermissionDenied):
        submit_claim(bob, namespace)


def test_it_refuses_claims_in_a_rejected_namespace(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    services.namespace_request_reject(user=carol, namespace_request=namespace, reason="no budget")
    with pytest.raises(ValidationError) as excinfo:
        submit_claim(alice, namespace)
    assert "rejected" in errors_of(excinfo)["namespace_request"][0]


def test_it_lets_only_approvers_approve(namespace: NamespaceRequest, alice: User) -> None:
    claim = submit_claim(alice, namespace)
    with pytest.raises(PermissionDenied):
        services.claim_request_approve(user=alice, claim_request=claim)
    with pytest.raises(PermissionDenied):
        services.namespace_request_approve(user=alice, namespace_request=namespace)
    claim.refresh_from_db()
    assert claim.state == "pending"


def test_it_lets_staff_approve(namespace: NamespaceRequest, db: None) -> None:
    staff = User.objects.create_user("sam", is_staff=True)
    services.namespace_request_approve(user=staff, namespace_request=namespace)
    assert namespace.state == "approved"


def test_it_approves_the_namespace_with_its_first_claim(
    namespace: NamespaceRequest,
    alice: User,
    carol: User,
    django_capture_on_commit_callbacks: object,
) -> None:
    claim = submit_claim(alice, namespace)
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.claim_request_approve(user=carol, claim_request=claim)
    namespace.refresh_from_db()
    assert (namespace.state, claim.state) == ("approved", "approved")
    assert claim.decided_by == carol
    # One task: the claim's, which applies the namespace first (a namespace task beside it
    # would race it and write the namespace twice).
    assert len(work_sent(callbacks)) == 1
    event = AuditEvent.objects.filter(object_kind="claim_request").last()
    assert (event.actor, event.from_state, event.to_state) == (carol, "pending", "approved")


def test_it_lets_only_one_of_two_approvals_win(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    claim = submit_claim(alice, namespace)
    stale_copy = ClaimRequest.objects.get(pk=claim.pk)
    services.claim_request_approve(user=carol, claim_request=claim)
    with pytest.raises(ValidationError) as excinfo:
        services.claim_request_reject(user=carol, claim_request=stale_copy, reason="late")
    assert "already approved" in errors_of(excinfo)[NON_FIELD_ERRORS][0]
    assert ClaimRequest.objects.get().state == "approved"
    assert AuditEvent.objects.filter(object_kind="claim_request", to_state="approved").count() == 1


def test_it_names_the_claim_when_an_approval_race_is_lost(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    claim = submit_claim(alice, namespace)
    stale_copy = ClaimRequest.objects.select_related("namespace_request").get(pk=claim.pk)
    services.claim_request_approve(user=carol, claim_request=claim)
    with pytest.raises(ValidationError) as excinfo:
        services.claim_request_approve(user=carol, claim_request=stale_copy)
    assert errors_of(excinfo)[NON_FIELD_ERRORS] == [f"{claim.name} is already approved."]
    assert AuditEvent.objects.filter(to_state="approved").count() == 2  # namespace, claim


def test_it_gives_a_claim_an_approver_makes_to_the_namespaces_owner(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    """The owner holds the namespace's access and runs its verifications: what is in it is
    hers, whoever typed it in. The audit trail says who did."""
    claim = submit_claim(carol, namespace)
    assert claim.owner == alice
    assert list(ClaimRequest.objects.filter(owner=alice)) == [claim]
    event = AuditEvent.objects.get(object_kind="claim_request", object_id=claim.pk)
    assert (event.actor, event.owner) == (carol, alice)


def test_it_requires_a_reason_to_reject(namespace: NamespaceRequest, carol: User) -> None:
    with pytest.raises(ValidationError) as excinfo:
        services.namespace_request_reject(user=carol, namespace_request=namespace, reason="  ")
    assert "reason" in errors_of(excinfo)
    namespace.refresh_from_db()
    assert namespace.state == "pending"


def test_it_rejects_with_the_reason_and_rejects_the_claims_inside(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    claim = submit_claim(alice, namespace)
    services.namespace_request_reject(user=carol, namespace_request=namespace, reason="No budget")
    claim.refresh_from_db()
    assert namespace.state_message == "No budget"
    assert claim.state == "rejected"
    assert "No budget" in claim.state_message


def test_it_cannot_approve_a_rejected_claim(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    claim = submit_claim(alice, namespace)
    services.claim_request_reject(user=carol, claim_request=claim, reason="too big")
    with pytest.raises(ValidationError):
        services.claim_request_approve(user=carol, claim_request=claim)
    assert ClaimRequest.objects.get().state == "rejected"


def test_it_releases_a_pending_claim_without_cluster_work(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    claim = submit_claim(alice, namespace)
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.claim_request_release(user=alice, claim_request=claim)
    assert claim.state == "released"
    assert ClaimRequest.objects.get().cleaned_up_at is not None
    assert work_sent(callbacks) == []


def test_it_releases_an_applied_claim_and_its_run(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    claim = applied_claim(alice, namespace)
    run = services.verification_run_start(user=alice, claim_request=claim)
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.claim_request_release(user=alice, claim_request=claim)
    run.refresh_from_db()
    assert (claim.state, run.state) == ("released", "failed")
    assert ClaimRequest.objects.get().cleaned_up_at is None
    assert len(work_sent(callbacks)) == 1  # delete it from the cluster


def test_it_keeps_others_from_releasing(
    namespace: NamespaceRequest, alice: User, bob: User
) -> None:
    claim = submit_claim(alice, namespace)
    with pytest.raises(PermissionDenied):
        services.claim_request_release(user=bob, claim_request=claim)


def test_it_cannot_release_twice(namespace: NamespaceRequest, alice: User) -> None:
    claim = submit_claim(alice, namespace)
    services.claim_request_release(user=alice, claim_request=claim)
    with pytest.raises(ValidationError):
        services.claim_request_release(user=alice, claim_request=claim)


def applied_claim(user: User, namespace: NamespaceRequest, state: str = "waiting") -> ClaimRequest:
    claim = submit_claim(user, namespace)
    ClaimRequest.objects.filter(pk=claim.pk).update(state=state)
    claim.refresh_from_db()
    return claim


def test_it_retries_only_failed_claims(namespace: NamespaceRequest, alice: User) -> None:
    claim = submit_claim(alice, namespace)
    with pytest.raises(ValidationError):
        services.claim_request_retry(user=alice, claim_request=claim)
    transition(claim, to="failed", allowed=("pending",), message="refused")
    services.claim_request_retry(user=alice, claim_request=claim)
    assert claim.state == "approved"


def test_it_starts_a_verification_run_with_a_pod_named_by_the_run(
    namespace: NamespaceRequest, alice: User
) -> None:
    claim = applied_claim(alice, namespace)
    run = services.verification_run_start(user=alice, claim_request=claim)
    assert run.state == "queued"
    assert run.pod_name == f"train-verify-{run.pk}"
    VerificationRun.objects.filter(pk=run.pk).update(state="succeeded")
    second = services.verification_run_start(user=alice, claim_request=claim)
    assert second.pod_name == f"train-verify-{second.pk}"
    assert states(run) == [("", "queued")]
    assert VerificationRun.objects.get(pk=second.pk).state_message == "Queued."


def test_it_refuses_a_second_run_while_one_is_going(
    namespace: NamespaceRequest, alice: User
) -> None:
    claim = applied_claim(alice, namespace)
    services.verification_run_start(user=alice, claim_request=claim)
    with pytest.raises(ValidationError) as excinfo:
        services.verification_run_start(user=alice, claim_request=claim)
    assert "still going" in errors_of(excinfo)[NON_FIELD_ERRORS][0]
    assert VerificationRun.objects.count() == 1


def test_it_queues_a_run_until_its_claim_is_applied(
    namespace: NamespaceRequest, alice: User
) -> None:
    claim = submit_claim(alice, namespace)
    run = services.verification_run_start(user=alice, claim_request=claim)
    assert (run.state, run.state_message) == (
        "queued",
        "Queued; starts as soon as the claim is applied.",
    )


def test_it_keeps_others_from_starting_runs(
    namespace: NamespaceRequest, alice: User, bob: User
) -> None:
    claim = applied_claim(alice, namespace, state="in_use")
    with pytest.raises(PermissionDenied):
        services.verification_run_start(user=bob, claim_request=claim)


def test_it_deletes_an_active_namespace_with_its_claims(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    claim = applied_claim(alice, namespace)
    NamespaceRequest.objects.filter(pk=namespace.pk).update(state="active")
    namespace.refresh_from_db()
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.namespace_request_delete(user=alice, namespace_request=namespace)
    claim.refresh_from_db()
    assert (namespace.state, claim.state) == ("deleting", "released")
    assert len(work_sent(callbacks)) == 1  # delete the namespace (its claims go with it)


def test_it_withdraws_a_pending_namespace_and_its_claims(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    claim = submit_claim(alice, namespace)
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.namespace_request_delete(user=alice, namespace_request=namespace)
    claim.refresh_from_db()
    assert (namespace.state, claim.state) == ("deleted", "rejected")
    assert work_sent(callbacks) == []  # nothing was in the cluster


def test_it_retries_a_failed_namespace(namespace: NamespaceRequest, alice: User, bob: User) -> None:
    transition(namespace, to="failed", allowed=("pending",), message="forbidden")
    with pytest.raises(PermissionDenied):
        services.namespace_request_retry(user=bob, namespace_request=namespace)
    services.namespace_request_retry(user=alice, namespace_request=namespace)
    assert namespace.state == "approved"


def test_it_cancels_a_run_for_its_owner_and_deletes_its_pod(
    namespace: NamespaceRequest, alice: User, django_capture_on_commit_callbacks: object
) -> None:
    claim = applied_claim(alice, namespace, state="in_use")
    run = services.verification_run_start(user=alice, claim_request=claim)
    transition(run, to="running", allowed=("queued",), message="Running on gpu-node-1.")
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[operator]
        services.verification_run_cancel(user=alice, run=run)
    run.refresh_from_db()
    assert (run.state, run.state_message) == ("failed", "Cancelled by alice.")
    assert run.finished_at is not None
    assert states(run)[-1] == ("running", "failed")
    assert list(events_for(run))[-1].actor == alice
    assert len(work_sent(callbacks)) == 1  # delete the Pod from the cluster
    claim.refresh_from_db()
    assert claim.state == "in_use"  # the claim stays; the cluster frees the GPU


def test_it_lets_an_approver_cancel_anyones_run(
    namespace: NamespaceRequest, alice: User, carol: User
) -> None:
    run = services.verification_run_start(user=alice, claim_request=applied_claim(alice, namespace))
    services.verification_run_cancel(user=carol, run=run)
    assert VerificationRun.objects.get().state_message == "Cancelled by carol."


def test_it_keeps_others_from_cancelling_a_run(
    namespace: NamespaceRequest, alice: User, bob: User
) -> None:
    run = services.verification_run_start(user=alice, claim_request=applied_claim(alice, namespace))
    with pytest.raises(PermissionDenied):
        services.verification_run_cancel(user=bob, run=run)
    with pytest.raises(PermissionDenied):
        services.verification_run_cancel(user=AnonymousUser(), run=run)
    assert VerificationRun.objects.get().state == "queued"


@pytest.mark.parametrize("final", ["succeeded", "failed"])
def test_it_cannot_cancel_a_run_that_ended(
    namespace: NamespaceRequest, alice: User, final: str, django_capture_on_commit_callbacks: object
) -> None:
    run = services.verification_run_start(user=alice, claim_request=applied_claim(alice, namespace))
    transition(run, to=final, allowed=("queued",), message="Done.")
    capture = django_capture_on_commit_callbacks  # type: ignore[operator]
    with capture() as callbacks, pytest.raises(ValidationError) as excinfo:
        services.verification_run_cancel(user=alice, run=run)
    message = errors_of(excinfo)[NON_FIELD_ERRORS][0]
    assert message == f"The run already ended ({final}): nothing to cancel."
    assert VerificationRun.objects.get().state_message == "Done."
    assert work_sent(callbacks) == []


def test_it_cannot_cancel_a_run_that_ended_meanwhile(
    namespace: NamespaceRequest, alice: User
) -> None:
    run = services.verification_run_start(user=alice, claim_request=applied_claim(alice, namespace))
    # Another worker recorded the end after this copy of the run was loaded.
    VerificationRun.objects.filter(pk=run.pk).update(state="succeeded")
    with pytest.raises(ValidationError) as excinfo:
        services.verification_run_cancel(user=alice, run=run)
    assert "already ended (succeeded)" in errors_of(excinfo)[NON_FIELD_ERRORS][0]
    assert VerificationRun.objects.get().state == "succeeded"


def test_it_cancels_a_run_the_worker_moved_on_meanwhile(
    namespace: NamespaceRequest, alice: User
) -> None:
    run = services.verification_run_start(user=alice, claim_request=applied_claim(alice, namespace))
    # The worker started the Pod after this copy of the run was loaded.
    VerificationRun.objects.filter(pk=run.pk).update(state="creating")
    services.verification_run_cancel(user=alice, run=run)
    assert VerificationRun.objects.get().state_message == "Cancelled by alice."
    assert states(run)[-1] == ("creating", "failed")


def test_it_releases_a_claim_the_sync_moved_on_meanwhile(
    namespace: NamespaceRequest, alice: User
) -> None:
    claim = applied_claim(alice, namespace)
    # A Pod (say, of a run just cancelled) still held the GPU at the last sync.
    ClaimRequest.objects.filter(pk=claim.pk).update(state="in_use")
    services.claim_request_release(user=alice, claim_request=claim)
    assert ClaimRequest.objects.get().state == "released"
    assert states(claim)[-1] == ("in_use", "released")
