"""Workload profiles and workloads through the API: who may do what, field errors, the
Idempotency-Key, stop."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from rest_framework.test import APIClient

from claims.domain import workload_observations as observed
from claims.models import ClaimRequest, Cluster, Workload, WorkloadProfile
from tests.api.conftest import applied_claim, namespace_with_claim
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile

Api = Callable[[str], APIClient]
PERSONAS = ("anonymous", "alice", "bob", "carol")


def profile_id(name: str) -> int:
    return seeded_profile(name).pk


def test_everyone_reads_the_offered_profiles(api: Api) -> None:
    seeded_profile(BATCH)
    seeded_profile(JUPYTER)
    WorkloadProfile.objects.filter(name=JUPYTER).update(active=False)
    got = api("alice").get("/api/v1/workload-profiles/")
    assert got.status_code == 200
    assert [p["name"] for p in got.json()["results"]] == [BATCH]
    assert api("anonymous").get("/api/v1/workload-profiles/").status_code == 401


def make_admin(user: User) -> None:
    """Staff with the model's permissions, as the Django admin asks (approving is not enough)."""
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__endswith="workloadprofile"))


def test_only_admins_write_profiles(api: Api, alice: User, carol: User) -> None:
    body = {"name": "TensorBoard", "kind": "notebook", "image": "tensorflow/tensorflow:2.16.1"}
    for who in ("alice", "carol"):
        refused = api(who).post("/api/v1/workload-profiles/", body, format="json")
        assert refused.status_code == 403
        assert refused.json() == {"detail": "Only an admin changes workload profiles."}
    make_admin(carol)
    created = api("carol").post("/api/v1/workload-profiles/", body, format="json")
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    changed = api("carol").patch(
        f"/api/v1/workload-profiles/{pk}/", {"ports": [6006]}, format="json"
    )
    assert changed.json()["ports"] == [6006]
    assert api("alice").delete(f"/api/v1/workload-profiles/{pk}/").status_code == 403
    assert api("carol").delete(f"/api/v1/workload-profiles/{pk}/").status_code == 200
    assert not WorkloadProfile.objects.filter(pk=pk).exists()


def test_a_bad_profile_gets_field_errors(api: Api, carol: User) -> None:
    make_admin(carol)
    body = {
        "name": "Broken",
        "kind": "job",
        "image": "Not An Image",
        "command": "python -c 'x",
        "env": {"1X": "y"},
        "cpu_request": "lots",
        "ports": [0],
        "allowed_images": ["not an image/*"],
    }
    refused = api("carol").post("/api/v1/workload-profiles/", body, format="json")
    assert refused.status_code == 400
    assert set(refused.json()) == {
        "image",
        "command",
        "env",
        "cpu_request",
        "ports",
        "allowed_images",
    }
    assert not WorkloadProfile.objects.filter(name="Broken").exists()


def test_only_the_claims_owner_and_approvers_start_workloads(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    got = []
    for index, who in enumerate(PERSONAS):
        claim = applied_claim(alice, carol, cluster, str(index))
        body = {"claim": claim.pk, "profile": profile_id(BATCH)}
        got.append(api(who).post("/api/v1/workloads/", body, format="json").status_code)
    assert tuple(got) == (401, 201, 400, 201)
    assert {w.owner for w in Workload.objects.all()} == {alice}


def test_a_job_with_the_users_command_and_a_retry_with_the_same_key(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster, "k")
    body = {
        "claim": claim.pk,
        "profile": profile_id(BATCH),
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": "python train.py",
        "args": "--epochs 3",
        "env": {"WANDB_MODE": "offline"},
    }
    headers = {"HTTP_IDEMPOTENCY_KEY": "start-1"}
    first = api("alice").post("/api/v1/workloads/", body, format="json", **headers)
    again = api("alice").post("/api/v1/workloads/", body, format="json", **headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    workload = Workload.objects.get()
    assert (workload.command, workload.args) == ("python train.py", "--epochs 3")
    assert workload.env == {"WANDB_MODE": "offline"}
    assert first.json()["access"] is None
    listed = api("alice").get(f"/api/v1/workloads/?claim={claim.pk}").json()["results"]
    assert [w["id"] for w in listed] == [workload.pk]
    assert api("bob").get(f"/api/v1/workloads/{workload.pk}/").status_code == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": "has spaces:1"}, "image"),
        ({"command": "echo 'unclosed"}, "command"),
        ({"env": {"9LIVES": "x"}}, "env"),
        ({"profile": 999999}, "profile"),
        ({"claim": 999999}, "claim"),
    ],
)
def test_bad_input_is_a_400_on_its_field_and_makes_nothing(
    api: Api, alice: User, carol: User, cluster: Cluster, change: dict[str, Any], field: str
) -> None:
    claim = applied_claim(alice, carol, cluster, "bad")
    body = {"claim": claim.pk, "profile": profile_id(BATCH), **change}
    refused = api("alice").post("/api/v1/workloads/", body, format="json")
    assert refused.status_code == 400
    assert list(refused.json()) == [field]
    assert not Workload.objects.exists()


def test_a_claim_not_yet_approved_is_refused(api: Api, alice: User, cluster: Cluster) -> None:
    claim = namespace_with_claim(alice, cluster, "p")
    body = {"claim": claim.pk, "profile": profile_id(BATCH)}
    refused = api("alice").post("/api/v1/workloads/", body, format="json")
    assert refused.status_code == 400
    assert "The claim is pending" in refused.json()["claim"][0]


def test_a_notebooks_access_and_token_are_its_owners(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster, "nb")
    body = {"claim": claim.pk, "profile": profile_id(JUPYTER)}
    started = api("alice").post("/api/v1/workloads/", body, format="json").json()
    access = started["access"]
    assert access["port_forward"] == (
        f"kubectl --kubeconfig {cluster.name}-{claim.namespace}.kubeconfig "
        f"--namespace {claim.namespace} port-forward service/{started['name']} 8888:8888"
    )
    assert access["local_url"] == "http://localhost:8888/lab"
    assert len(access["token"]) > 30
    seen_by_approver = api("carol").get(f"/api/v1/workloads/{started['id']}/").json()
    assert seen_by_approver["access"]["token"] == ""


def test_stop_ends_it_once(api: Api, alice: User, carol: User, cluster: Cluster) -> None:
    claim = applied_claim(alice, carol, cluster, "s")
    body = {"claim": claim.pk, "profile": profile_id(BATCH)}
    pk = api("alice").post("/api/v1/workloads/", body, format="json").json()["id"]
    assert api("bob").post(f"/api/v1/workloads/{pk}/stop/").status_code == 404
    stopped = api("alice").post(f"/api/v1/workloads/{pk}/stop/")
    assert stopped.status_code == 200
    assert (stopped.json()["state"], stopped.json()["state_message"]) == (
        "stopped",
        "Stopped by alice.",
    )
    assert api("alice").post(f"/api/v1/workloads/{pk}/stop/").status_code == 409
    assert ClaimRequest.objects.get(pk=claim.pk).state == "waiting"


def test_its_log_reads_on_from_since_and_says_when_complete(
    api: Api, alice: User, carol: User, cluster: Cluster
) -> None:
    claim = applied_claim(alice, carol, cluster, "l")
    body = {"claim": claim.pk, "profile": profile_id(BATCH)}
    pk = api("alice").post("/api/v1/workloads/", body, format="json").json()["id"]
    url = f"/api/v1/workloads/{pk}/logs/"
    empty = api("alice").get(url)
    assert (empty.status_code, empty.content, empty["X-Log-Complete"]) == (200, b"", "false")
    workload = Workload.objects.get(pk=pk)
    at = timezone.now()
    observed.workload_logs_appended(
        workload=workload, pod_name="p-1", lines=[(at, "epoch 1/1 step 1/2 loss 1.2")]
    )
    first = api("alice").get(url)
    assert first.content == b"epoch 1/1 step 1/2 loss 1.2\n"
    since = first["X-Next-Since"]
    Workload.objects.filter(pk=pk).update(state="running", started_at=at)
    observed.workload_logs_appended(
        workload=workload, pod_name="p-2", lines=[(at, "train-sim: failed, exiting with code 3")]
    )
    observed.workload_ended(
        workload=Workload.objects.get(pk=pk),
        succeeded=False,
        message="The Job failed (BackoffLimitExceeded): Job has reached the backoff limit",
        exit_code=3,
        started_at=at,
        finished_at=at + timedelta(seconds=42),
    )
    rest = api("alice").get(url, {"since": since})
    assert rest.content.decode() == "==> p-2 <==\ntrain-sim: failed, exiting with code 3\n"
    assert rest["X-Log-Complete"] == "true"
    read = api("alice").get(f"/api/v1/workloads/{pk}/").json()
    assert (read["state"], read["exit_code"], read["duration_seconds"]) == ("failed", 3, 42.0)
    assert read["pod_stage"] == ""
    assert api("bob").get(url).status_code == 404
    assert api("alice").get(url, {"since": "-1"}).status_code == 400
