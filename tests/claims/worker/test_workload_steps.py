"""Workloads on a claim, against kubesim under Pod Security "restricted": the manifests are
upstream-valid, the Job and the notebook are admitted, the notebook runs, stopping and
releasing take everything away, and a refusal leaves nothing behind."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import kubernetes_validate
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from claims.domain import services
from claims.domain.transitions import transition
from claims.kube import workload_manifests
from claims.models import ClaimRequest, Cluster, Workload, WorkloadProfile
from claims.read import planned
from claims.worker import cluster_steps, sync, workload_steps
from kubesim.registry.pod_security import violations
from tests.fixtures.portal import pods_in, wait_until
from tests.fixtures.workloads import BATCH, JUPYTER, seeded_profile


def waiting_claim(user: User, cluster: Cluster) -> ClaimRequest:
    ns = services.namespace_request_submit(
        user=user, cluster=cluster, name=f"wl-{uuid.uuid4().hex[:6]}"
    )
    claim = services.claim_request_submit(
        user=user, namespace_request=ns, name="train", device_class="gpu.nvidia.com"
    )
    transition(ns, to="approved", allowed=("pending",))
    transition(claim, to="approved", allowed=("pending",))
    cluster_steps.apply_claim(claim)
    claim = ClaimRequest.objects.get(pk=claim.pk)
    assert claim.state == "waiting"
    return claim


def profile(name: str) -> WorkloadProfile:
    return seeded_profile(name)


def objects(handle: Any, namespace: str, path: str) -> list[str]:
    items = handle.admin("GET", path.format(ns=namespace))["items"]
    live = [i for i in items if not i["metadata"].get("deletionTimestamp")]
    return sorted(i["metadata"]["name"] for i in live)


JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
SERVICES = "/api/v1/namespaces/{ns}/services"


def test_the_seeded_profiles_make_manifests_valid_for_kubernetes_1_34(
    alice: User, cluster: Cluster, settings: Any
) -> None:
    settings.NOTEBOOK_HOST_PATTERN = "{name}.{namespace}.nb.example.org"
    settings.NOTEBOOK_INGRESS_CLASS = "nginx"
    claim = ClaimRequest.objects.get(pk=waiting_claim(alice, cluster).pk)
    documents = []
    left = (claim.expires_at - timezone.now()).total_seconds()
    for name in (BATCH, JUPYTER):
        workload = services.workload_start(user=alice, claim_request=claim, profile=profile(name))
        documents += planned.workload_manifests(workload, token="t0ken")
    kinds = [d["kind"] for d in documents]
    assert kinds == ["Job", "Pod", "Service", "Ingress"]
    for document in documents:
        kubernetes_validate.validate(document, "1.34", strict=True)
    job, pod, service, ingress = documents
    template = job["spec"]["template"]["spec"]
    for spec in (template, pod["spec"]):
        assert violations("restricted", spec) == []
        assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "train"}]
        assert all(c["resources"]["claims"] == [{"name": "gpu"}] for c in spec["containers"])
        assert spec["restartPolicy"] == "Never"
    assert job["spec"]["ttlSecondsAfterFinished"] == settings.WORKLOAD_JOB_TTL_SECONDS
    assert job["spec"]["backoffLimit"] == 2
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert [r["action"] for r in rules] == ["FailJob", "Ignore"]
    # Never past the claim's end.
    assert 0 < job["spec"]["activeDeadlineSeconds"] <= left
    assert 0 < pod["spec"]["activeDeadlineSeconds"] <= left
    # The Pods of the Job carry the portal's labels: the cluster loop sees them.
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["gpu-portal.io/claim-request"] == str(claim.pk)
    assert labels["gpu-portal.io/workload"] == job["metadata"]["labels"]["gpu-portal.io/workload"]
    assert {"name": "JUPYTER_TOKEN", "value": "t0ken"} in pod["spec"]["containers"][0]["env"]
    assert service["spec"]["selector"] == {
        "gpu-portal.io/workload": pod["metadata"]["labels"]["gpu-portal.io/workload"]
    }
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == f"{pod['metadata']['name']}.{claim.namespace}.nb.example.org"
    assert ingress["spec"]["ingressClassName"] == "nginx"


def test_a_deadline_is_never_past_the_claims_end() -> None:
    claim = ClaimRequest(expires_at=timezone.now() + timedelta(hours=1))
    job = Workload(claim=claim, kind="job", active_deadline_seconds=7200)
    assert 3590 <= planned.workload_deadline_seconds(job) <= 3600
    job.active_deadline_seconds = 60
    assert planned.workload_deadline_seconds(job) == 60
    claim.expires_at = None
    job.active_deadline_seconds = None
    assert planned.workload_deadline_seconds(job) == 604800


def test_a_job_and_a_notebook_are_admitted_and_run(
    alice: User, slow_cluster: Cluster, slow_kubesim: Any
) -> None:
    """The seeded profiles as they are: their images pull on kubesim's default topology, the
    notebook runs and the job (nvidia-smi) runs to its end."""
    claim = waiting_claim(alice, slow_cluster)
    job = services.workload_start(user=alice, claim_request=claim, profile=profile(BATCH))
    notebook = services.workload_start(user=alice, claim_request=claim, profile=profile(JUPYTER))
    for workload in (job, notebook):
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk))
        workload_steps.start_workload(Workload.objects.get(pk=workload.pk))  # twice: harmless
        workload.refresh_from_db()
        assert workload.state == "started", workload.state_message
        assert workload.kube_uid
    ns = claim.namespace
    assert objects(slow_kubesim, ns, JOBS) == [job.name]
    assert objects(slow_kubesim, ns, SERVICES) == [notebook.name]
    assert notebook.name in pods_in(slow_kubesim, ns)

    def notebook_running_and_job_done() -> bool:
        sync.sync_cluster(slow_cluster)
        states = dict(Workload.objects.values_list("pk", "state"))
        return states[notebook.pk] != "started" and states[job.pk] in Workload.FINAL_STATES

    wait_until(notebook_running_and_job_done, timeout=60)
    notebook.refresh_from_db()
    job.refresh_from_db()
    assert notebook.state == "running"
    assert notebook.node
    assert job.state == "succeeded", job.state_message
    assert job.exit_code == 0
    # Both share the one claim; its page lists them.
    assert list(claim.workloads.order_by("pk")) == [job, notebook]


def test_stopping_deletes_what_it_made(alice: User, cluster: Cluster, kubesim_cluster: Any) -> None:
    claim = waiting_claim(alice, cluster)
    notebook = services.workload_start(user=alice, claim_request=claim, profile=profile(JUPYTER))
    workload_steps.start_workload(Workload.objects.get(pk=notebook.pk))
    services.workload_stop(user=alice, workload=Workload.objects.get(pk=notebook.pk))
    stopped = Workload.objects.select_related("claim__namespace_request__cluster").get(
        pk=notebook.pk
    )
    assert stopped.state == "stopped"
    assert stopped.state_message == "Stopped by alice."
    workload_steps.delete_workload(stopped)
    ns = claim.namespace
    assert objects(kubesim_cluster, ns, SERVICES) == []
    assert notebook.name not in pods_in(kubesim_cluster, ns)
    assert Workload.objects.get(pk=notebook.pk).cleaned_up_at is not None
    with pytest.raises(ValidationError, match="already ended"):
        services.workload_stop(user=alice, workload=stopped)


def test_nothing_outlives_its_claim(alice: User, cluster: Cluster, kubesim_cluster: Any) -> None:
    claim = waiting_claim(alice, cluster)
    job = services.workload_start(user=alice, claim_request=claim, profile=profile(BATCH))
    workload_steps.start_workload(Workload.objects.get(pk=job.pk))
    services.claim_request_release(user=alice, claim_request=claim)
    job.refresh_from_db()
    assert job.state == "stopped"
    assert job.state_message == "The claim was released."

    released = ClaimRequest.objects.get(pk=claim.pk)

    def cleaned_up() -> bool:
        try:
            cluster_steps.delete_claim(ClaimRequest.objects.get(pk=claim.pk))
        except Exception:
            return False
        return True

    wait_until(cleaned_up, timeout=30)
    assert objects(kubesim_cluster, released.namespace, JOBS) == []
    assert Workload.objects.get(pk=job.pk).cleaned_up_at is not None


def test_a_refused_workload_leaves_nothing_behind(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = waiting_claim(alice, cluster)
    notebook = services.workload_start(user=alice, claim_request=claim, profile=profile(JUPYTER))
    # The Service's name taken by someone else's: the Pod went in first and comes out again.
    ns = claim.namespace
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": notebook.name, "namespace": ns},
        "spec": {"ports": [{"port": 80}]},
    }
    kubesim_cluster.admin("POST", f"/api/v1/namespaces/{ns}/services", theirs)
    workload_steps.start_workload(Workload.objects.get(pk=notebook.pk))
    notebook.refresh_from_db()
    assert notebook.state == "failed"
    assert "not managed by this portal" in notebook.state_message
    assert notebook.name not in pods_in(kubesim_cluster, ns)


def test_who_may_start_and_on_which_claim(
    alice: User, bob: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = waiting_claim(alice, cluster)
    with pytest.raises(PermissionDenied):
        services.workload_start(user=bob, claim_request=claim, profile=profile(BATCH))
    pending = services.claim_request_submit(
        user=alice,
        namespace_request=claim.namespace_request,
        name="later",
        device_class="gpu.nvidia.com",
    )
    with pytest.raises(ValidationError) as refused:
        services.workload_start(user=alice, claim_request=pending, profile=profile(BATCH))
    assert "The claim is pending" in refused.value.message_dict["claim"][0]
    ClaimRequest.objects.filter(pk=claim.pk).update(expires_at=timezone.now())
    claim.refresh_from_db()
    with pytest.raises(ValidationError) as expired:
        services.workload_start(user=alice, claim_request=claim, profile=profile(BATCH))
    assert "expired" in expired.value.message_dict["claim"][0]
    assert not Workload.objects.exists()


def test_bad_input_is_refused_field_by_field_and_nothing_is_made(
    alice: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = waiting_claim(alice, cluster)
    jupyter = profile(JUPYTER)
    with pytest.raises(ValidationError) as refused:
        services.workload_start(
            user=alice,
            claim_request=claim,
            profile=profile(BATCH),
            image="Not An Image",
            command="python -c 'oops",
            env={"1BAD": "x"},
        )
    assert set(refused.value.message_dict) == {"image", "command", "env"}
    with pytest.raises(ValidationError) as not_listed:
        services.workload_start(
            user=alice, claim_request=claim, profile=jupyter, image="docker.io/evil/miner:1"
        )
    assert "does not allow this image" in not_listed.value.message_dict["image"][0]
    jupyter.active = False
    jupyter.save()
    with pytest.raises(ValidationError) as gone:
        services.workload_start(user=alice, claim_request=claim, profile=jupyter.pk)
    assert "does not exist" in gone.value.message_dict["profile"][0]
    with pytest.raises(ValidationError):
        services.workload_start(user=alice, claim_request=claim, profile=999999)
    assert not Workload.objects.exists()


def test_a_notebooks_token_is_its_owners_alone(
    alice: User, carol: User, cluster: Cluster, kubesim_cluster: Any
) -> None:
    claim = waiting_claim(alice, cluster)
    notebook = services.workload_start(user=carol, claim_request=claim, profile=profile(JUPYTER))
    assert notebook.owner == alice  # started by an approver for her: still hers
    token = services.workload_access_token(user=alice, workload=notebook)
    assert len(token) > 30
    assert token not in notebook.access_token_encrypted
    assert services.workload_access_token(user=carol, workload=notebook) == ""
    pod = planned.workload_manifests(notebook, token=token)[0]
    env = pod["spec"]["containers"][0]["env"]
    assert {"name": workload_manifests.NOTEBOOK_TOKEN_ENV, "value": token} in env
