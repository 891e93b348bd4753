"""Starting a workload from a claim's page: the form, its live preview, errors next to their
fields; a workload's page; stopping; the release that says what it stops; the profiles'
admin pages."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import kubernetes_validate
import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from claims.domain import observations, services
from claims.domain import workload_observations as observed
from claims.models import ClaimRequest, Workload, WorkloadProfile
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile


@pytest.fixture
def applied(claim: ClaimRequest, charlie: User) -> ClaimRequest:
    """Approved and created in the cluster: a workload may start on it."""
    services.claim_request_approve(user=charlie, claim_request=claim)
    observations.claim_applying(claim_request=claim)
    observations.claim_applied(claim_request=claim, api_version="v1", manifest={})
    return ClaimRequest.objects.get(pk=claim.pk)


TRAIN = "ghcr.io/gpu-portal/train-sim:1.0"


def profile_id(name: str) -> int:
    return seeded_profile(name).pk


def field_errors(page: str, field: str) -> str:
    """The text of the errors shown in the field's own block."""
    start = rf'<div class="field has-error" id="field-{field}">'
    block = re.search(rf'{start}(.*?)</div>\s*(?=<div class="field|<button)', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", block.group(1))) if block else ""


def test_the_claim_page_offers_to_start_and_lists_its_workloads(
    applied: ClaimRequest,
) -> None:
    client = client_for(applied.owner)
    page = client.get(reverse("claim", args=[applied.pk])).content.decode()
    assert 'id="start-workload"' in page
    assert "No workloads yet" in page
    client.post(reverse("workload-start", args=[applied.pk]), {"profile": profile_id(JUPYTER)})
    page = client.get(reverse("claim", args=[applied.pk])).content.decode()
    workload = Workload.objects.get()
    assert f'id="workload-{workload.pk}"' in page
    assert JUPYTER in page


def test_a_pending_claim_offers_no_start(claim: ClaimRequest) -> None:
    page = client_for(claim.owner).get(reverse("claim", args=[claim.pk])).content.decode()
    assert 'id="start-workload"' not in page
    form = client_for(claim.owner).get(reverse("workload-start", args=[claim.pk]))
    assert "The claim is pending" in form.content.decode()


def test_the_form_shows_each_error_next_to_its_field_and_starts_nothing(
    applied: ClaimRequest,
) -> None:
    response = client_for(applied.owner).post(
        reverse("workload-start", args=[applied.pk]),
        {
            "profile": profile_id(BATCH),
            "image": "nvcr.io/NVIDIA/cuda:12",
            "command": "python -c 'print(1)",
            "env": "9LIVES=x",
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "is not an image reference" in field_errors(page, "image")
    assert "does not parse as shell words" in field_errors(page, "command")
    assert "'9LIVES' is not a name Kubernetes accepts" in field_errors(page, "env")
    assert not Workload.objects.exists()
    gone = client_for(applied.owner).post(
        reverse("workload-start", args=[applied.pk]), {"profile": 999999}
    )
    assert field_errors(gone.content.decode(), "profile")


def test_the_preview_shows_the_job_it_will_apply(applied: ClaimRequest) -> None:
    response = client_for(applied.owner).post(
        reverse("workload-preview", args=[applied.pk]),
        {"profile": profile_id(BATCH), "command": "python train.py", "args": "--epochs 3"},
    )
    text = html.unescape(
        re.search(r'<pre id="manifest-yaml">(.*?)</pre>', response.content.decode(), re.S).group(1)
    )
    [job] = yaml.safe_load_all(text)
    kubernetes_validate.validate(job, "1.34", strict=True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert (container["command"], container["args"]) == (["python", "train.py"], ["--epochs", "3"])
    bad = client_for(applied.owner).post(
        reverse("workload-preview", args=[applied.pk]),
        {"profile": profile_id(BATCH), "command": "echo 'x"},
    )
    assert "does not parse as shell words" in bad.content.decode()


def test_a_notebooks_page_shows_its_owner_how_to_reach_it(
    applied: ClaimRequest,
    charlie: User,
) -> None:
    client = client_for(applied.owner)
    client.post(reverse("workload-start", args=[applied.pk]), {"profile": profile_id(JUPYTER)})
    workload = Workload.objects.get()
    page = html.unescape(client.get(reverse("workload", args=[workload.pk])).content.decode())
    assert f"port-forward service/{workload.name} 8888:8888" in page
    assert 'id="notebook-token"' in page
    as_approver = client_for(charlie).get(reverse("workload", args=[workload.pk])).content
    assert b'id="notebook-token"' not in as_approver
    assert b"port-forward" in as_approver


def test_stop_and_the_release_that_names_what_it_stops(
    applied: ClaimRequest,
) -> None:
    client = client_for(applied.owner)
    for name in (BATCH, JUPYTER):
        client.post(reverse("workload-start", args=[applied.pk]), {"profile": profile_id(name)})
    job, notebook = Workload.objects.order_by("pk")
    client.post(reverse("workload-stop", args=[job.pk]))
    assert Workload.objects.get(pk=job.pk).state == "stopped"
    confirm = client.get(reverse("claim-release", args=[applied.pk])).content.decode()
    doomed = re.search(r'<ul id="doomed-workloads">(.*?)</ul>', confirm, re.S).group(1)
    assert notebook.name in doomed and job.name not in doomed
    client.post(reverse("claim-release", args=[applied.pk]))
    assert Workload.objects.get(pk=notebook.pk).state == "stopped"


@pytest.mark.parametrize("who", ["alice", "charlie"])
def test_only_admins_manage_profiles(who: str, alice: User, charlie: User) -> None:
    user = {"alice": alice, "charlie": charlie}[who]
    client = client_for(user)
    seeded_profile(JUPYTER)
    listed = client.get(reverse("workload-profiles")).content.decode()
    assert JUPYTER in listed and 'id="add-profile"' not in listed
    assert client.get(reverse("workload-profile-new")).status_code == 403


def test_an_admin_adds_a_profile_with_errors_next_to_the_fields(charlie: User) -> None:
    charlie.is_staff = True
    charlie.save()
    charlie.user_permissions.add(*Permission.objects.filter(codename__endswith="workloadprofile"))
    client = client_for(charlie)
    bad = client.post(
        reverse("workload-profile-new"),
        {
            "name": "TensorBoard",
            "kind": "notebook",
            "image": "tensorflow/tensorflow:2.16.1-gpu",
            "cpu_limit": "two",
            "ports_text": "70000",
            "env_text": "NOEQUALS",
            "backoff_limit": "0",
        },
    ).content.decode()
    assert "not a Kubernetes quantity" in field_errors(bad, "cpu_limit")
    assert "NAME=value" in field_errors(bad, "env_text")
    assert not WorkloadProfile.objects.filter(name="TensorBoard").exists()
    good = client.post(
        reverse("workload-profile-new"),
        {
            "name": "TensorBoard",
            "kind": "notebook",
            "image": "tensorflow/tensorflow:2.16.1-gpu",
            "command": "tensorboard --logdir /tmp/logs --bind_all",
            "ports_text": "6006",
            "env_text": "TF_CPP_MIN_LOG_LEVEL=2",
            "allowed_images_text": "tensorflow/*",
            "backoff_limit": "0",
            "active": "on",
        },
    )
    assert good.status_code == 302
    profile = WorkloadProfile.objects.get(name="TensorBoard")
    assert (profile.ports, profile.env) == ([6006], {"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert profile.allowed_images == ["tensorflow/*"]


def test_a_jobs_page_shows_its_end_gpu_events_and_log_and_runs_it_again(
    applied: ClaimRequest,
) -> None:
    client = client_for(applied.owner)
    client.post(
        reverse("workload-start", args=[applied.pk]),
        {"profile": profile_id(BATCH), "image": TRAIN, "command": "train-sim", "args": "--steps 2"},
    )
    job = Workload.objects.get()
    at = timezone.now()
    Workload.objects.filter(pk=job.pk).update(state="running", started_at=at)
    job.refresh_from_db()
    gpu = {"device": "gpu-0", "attributes": {"productName": "NVIDIA H100 80GB HBM3"}}
    event = {"type": "Normal", "reason": "Pulled", "message": 'Successfully pulled image "x"'}
    observed.workload_pod_seen(
        workload=job, pod_name="p-1", stage="running", message="", node="gpu-node-1", devices=[gpu]
    )
    observed.workload_pod_events_seen(workload=job, events=[event | {"at": "", "count": 1}])
    observed.workload_logs_appended(workload=job, pod_name="p-1", lines=[(at, "train-sim: done")])
    page = client.get(reverse("workload", args=[job.pk])).content.decode()
    assert "running" in page and 'id="stop-workload"' in page
    assert "NVIDIA H100 80GB HBM3" in page and "gpu-node-1" in page
    assert "Successfully pulled image" in html.unescape(page)
    assert "train-sim: done" in page and 'id="workload-live"' in page
    observed.workload_ended(
        workload=job,
        succeeded=True,
        message="",
        exit_code=0,
        started_at=at,
        finished_at=at + timedelta(seconds=65),
    )
    page = client.get(reverse("workload", args=[job.pk])).content.decode()
    assert re.search(r'id="workload-exit-code"><samp>0</samp>', page)
    assert "1 min 05 s" in page and 'id="stop-workload"' not in page
    download = client.get(reverse("workload-log", args=[job.pk]))
    assert download.content == b"train-sim: done\n"
    assert download["Content-Disposition"] == f'attachment; filename="{job.name}.log"'
    again = client.post(reverse("workload-again", args=[job.pk]))
    new = Workload.objects.exclude(pk=job.pk).get()
    assert again.url == reverse("workload", args=[new.pk])
    assert (new.image, new.command, new.args) == (TRAIN, "train-sim", "--steps 2")
    assert new.state == "pending"


def test_run_again_says_why_it_cannot(applied: ClaimRequest) -> None:
    client = client_for(applied.owner)
    client.post(reverse("workload-start", args=[applied.pk]), {"profile": profile_id(BATCH)})
    job = Workload.objects.get()
    WorkloadProfile.objects.all().delete()
    again = client.post(reverse("workload-again", args=[job.pk]), follow=True)
    assert "does not exist" in again.content.decode()
    assert Workload.objects.count() == 1
