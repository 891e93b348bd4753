"""Following workloads on kubesim: a batch job ends as its Job's condition says (Complete, or
Failed with the Job controller's reason), with its container's exit code, log, Events and
the GPU it got; a Pod that cannot pull its image says so."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from claims.domain import services
from claims.models import Cluster, Workload, WorkloadLog
from claims.worker import sync, workload_steps
from tests.claims.worker.test_workload_steps import profile, waiting_claim
from tests.fixtures.portal import wait_until
from tests.fixtures.workloads import BATCH

TRAIN = "ghcr.io/gpu-portal/train-sim:1.0"


def train(user: User, cluster: Cluster, args: str, *, image: str = TRAIN) -> Workload:
    claim = waiting_claim(user, cluster)
    workload = services.workload_start(
        user=user,
        claim_request=claim,
        profile=profile(BATCH),
        image=image,
        command="train-sim",
        args=args,
    )
    workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
    return workload


def followed_until(
    cluster: Cluster, workload: Workload, done: Any, timeout: float = 60
) -> Workload:
    def reached() -> bool:
        sync.sync_cluster(cluster)
        return bool(done(Workload.objects.get(pk=workload.pk)))

    wait_until(reached, timeout=timeout)
    return Workload.objects.get(pk=workload.pk)


def test_a_job_succeeds_with_its_exit_code_log_events_and_gpu(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    job = train(alice, cluster, "--steps 3 --exit-code 0")
    job = followed_until(cluster, job, lambda w: w.is_final)
    assert job.state == "succeeded", job.state_message
    assert job.exit_code == 0
    assert job.started_at and job.finished_at and job.duration is not None
    assert job.pod_stage == ""
    assert job.pod_name.startswith(job.name + "-")
    assert job.node
    assert job.devices and job.devices[0]["device"].startswith("gpu-")
    log = WorkloadLog.objects.get(workload=job)
    assert "epoch 1/1 step 3/3 loss" in log.text
    assert log.text.rstrip().endswith("train-sim: done")
    reasons = {event["reason"] for event in job.pod_events}
    assert {"Scheduled", "Started"} <= reasons, job.pod_events


def test_a_job_fails_as_its_job_says_after_its_retries(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    batch = profile(BATCH)
    batch.backoff_limit = 0
    batch.save()
    job = train(alice, cluster, "--steps 2 --exit-code 3")
    job = followed_until(cluster, job, lambda w: w.is_final)
    assert job.state == "failed"
    assert job.state_message == (
        "The Job failed (BackoffLimitExceeded): Job has reached the specified backoff limit"
    )
    assert job.exit_code == 3
    assert "train-sim: failed, exiting with code 3" in WorkloadLog.objects.get(workload=job).text


def test_an_exit_code_the_pod_failure_policy_names_fails_the_job_at_once(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    job = train(alice, cluster, "--steps 1 --exit-code 1")
    job = followed_until(cluster, job, lambda w: w.is_final)
    assert job.state == "failed"
    assert job.state_message.startswith("The Job failed (PodFailurePolicy): Container main for pod")
    assert job.exit_code == 1


def test_an_image_that_cannot_be_pulled_says_so(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    job = train(alice, cluster, "--steps 1", image="ghcr.io/gpu-portal/train-sim:9.9")
    job = followed_until(cluster, job, lambda w: w.pod_stage == "image_pull_failed")
    assert job.state == "started"
    assert "main: ErrImagePull" in job.state_message
    services.workload_stop(user=alice, workload=job)
