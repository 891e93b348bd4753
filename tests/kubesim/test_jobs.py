"""The Job controller, TTL after finished, owner-reference garbage collection, the known
images (train-sim, Jupyter) and the pods/proxy subresource, through the official client."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

import kubesim
from tests.fixtures.kubesim import (
    api_client,
    create_namespace,
    raw_request,
    service_account_token,
    wait_until,
)

TRAIN = "ghcr.io/gpu-portal/train-sim:1.0"
NOTEBOOK = "quay.io/jupyter/pytorch-notebook:cuda12-latest"
DEADLINE = 60.0


@pytest.fixture
def namespace(kubesim_module: kubesim.Handle) -> str:
    return create_namespace(kubesim_module, "jobs")


@pytest.fixture
def batch(kubesim_module: kubesim.Handle) -> client.BatchV1Api:
    return client.BatchV1Api(api_client(kubesim_module))


@pytest.fixture
def core(kubesim_module: kubesim.Handle) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(kubesim_module))


def job_manifest(name: str, args: list[str], image: str = TRAIN, **spec: Any) -> dict:
    container = {"name": "main", "image": image, "args": args}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"metadata": {"name": name}, "spec": {"template": template, **spec}}


def conditions(job: Any) -> dict[str, Any]:
    return {c.type: c for c in job.status.conditions or []}


def finished(batch: client.BatchV1Api, namespace: str, name: str) -> Any:
    def check() -> Any:
        job = batch.read_namespaced_job(name, namespace)
        found = conditions(job)
        return job if "Complete" in found or "Failed" in found else None

    return wait_until(check, DEADLINE)


def job_events(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[str, str, str]]:
    found = core.list_namespaced_event(namespace).items
    return [
        (e.type, e.reason, e.message)
        for e in found
        if e.involved_object.kind == "Job" and e.involved_object.name == name
    ]


def test_a_job_runs_its_pods_to_completion(batch, core, namespace) -> None:
    manifest = job_manifest("train", ["--steps", "3"], completions=2, parallelism=1)
    created = batch.create_namespaced_job(namespace, manifest)
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}

    job = finished(batch, namespace, "train")

    found = conditions(job)
    assert [c.type for c in job.status.conditions] == ["SuccessCriteriaMet", "Complete"]
    for kind in ("SuccessCriteriaMet", "Complete"):
        assert found[kind].reason == "CompletionsReached"
        assert found[kind].message == "Reached expected number of succeeded pods"
    assert (job.status.succeeded, job.status.failed or 0, job.status.active or 0) == (2, 0, 0)
    assert job.status.completion_time and job.status.start_time
    assert not (job.status.uncounted_terminated_pods.succeeded or [])
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=train").items
    assert len(pods) == 2
    for pod in pods:
        assert pod.metadata.generate_name == "train-"
        assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == uid
        assert pod.metadata.labels["controller-uid"] == uid
        assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train"
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.uid) == ("Job", "train", uid)
        assert owner.controller and owner.block_owner_deletion
        assert not pod.metadata.finalizers  # the tracking finalizer is gone once counted
        log = core.read_namespaced_pod_log(pod.metadata.name, namespace)
        assert "epoch 1/1 step 3/3 loss" in log and "train-sim: done" in log
    events = job_events(core, namespace, "train")
    created_events = [e for e in events if e[1] == "SuccessfulCreate"]
    assert sorted(m for _, _, m in created_events) == sorted(
        f"Created pod: {p.metadata.name}" for p in pods
    )
    assert ("Normal", "Completed", "Job completed") in events


def test_a_job_with_a_distant_deadline_still_completes(batch, namespace) -> None:
    """The deadline's later re-check waits outside the queue (client-go's AddAfter): it must
    not swallow the syncs its Pods' changes ask for now."""
    manifest = job_manifest("deadline", ["--steps", "2"], activeDeadlineSeconds=86400)
    batch.create_namespaced_job(namespace, manifest)
    job = finished(batch, namespace, "deadline")
    assert "Complete" in conditions(job)
    assert job.status.succeeded == 1


def test_failing_pods_end_the_job_at_its_backoff_limit(batch, core, namespace) -> None:
    manifest = job_manifest("fails", ["--steps", "2", "--exit-code", "3"], backoffLimit=1)
    batch.create_namespaced_job(namespace, manifest)

    job = finished(batch, namespace, "fails")

    found = conditions(job)
    assert [c.type for c in job.status.conditions] == ["FailureTarget", "Failed"]
    assert found["Failed"].reason == "BackoffLimitExceeded"
    assert found["Failed"].message == "Job has reached the specified backoff limit"
    assert job.status.failed == 2 and not job.status.succeeded
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=fails").items
    codes = [p.status.container_statuses[0].state.terminated.exit_code for p in pods]
    assert codes == [3, 3]
    message = "Job has reached the specified backoff limit"
    assert ("Warning", "BackoffLimitExceeded", message) in job_events(core, namespace, "fails")


def test_a_fail_job_rule_fails_the_job_on_its_exit_code(batch, core, namespace) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]
    }
    manifest = job_manifest(
        "policy", ["--steps", "1", "--exit-code", "42"], backoffLimit=6, podFailurePolicy=policy
    )
    batch.create_namespaced_job(namespace, manifest)

    job = finished(batch, namespace, "policy")

    pod = core.list_namespaced_pod(namespace, label_selector="job-name=policy").items[0]
    failed = conditions(job)["Failed"]
    assert failed.reason == "PodFailurePolicy"
    assert failed.message == (
        f"Container main for pod {namespace}/{pod.metadata.name} failed with exit code 42 "
        "matching FailJob rule at index 0"
    )
    assert job.status.failed == 1


def test_an_ignore_rule_does_not_count_an_evicted_pod(batch, core, namespace) -> None:
    policy = {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        ]
    }
    manifest = job_manifest("evicted", ["--steps", "2000"], backoffLimit=0, podFailurePolicy=policy)
    batch.create_namespaced_job(namespace, manifest)

    def running_pod() -> Any:
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=evicted").items
        return next((p for p in pods if p.status.phase == "Running"), None)

    first = wait_until(running_pod, DEADLINE)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": first.metadata.name, "namespace": namespace},
    }
    core.create_namespaced_pod_eviction(first.metadata.name, namespace, eviction)

    def replaced() -> Any:
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=evicted").items
        return [p for p in pods if p.metadata.name != first.metadata.name]

    wait_until(replaced, DEADLINE)
    job = batch.read_namespaced_job("evicted", namespace)
    assert not job.status.failed and "Failed" not in conditions(job)


def test_active_deadline_fails_the_job_and_deletes_its_pods(batch, core, namespace) -> None:
    manifest = job_manifest("slow", [], image=NOTEBOOK, activeDeadlineSeconds=3)
    batch.create_namespaced_job(namespace, manifest)

    job = finished(batch, namespace, "slow")

    failed = conditions(job)["Failed"]
    assert (failed.reason, failed.message) == (
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert [c.type for c in job.status.conditions] == ["FailureTarget", "Failed"]
    assert (job.status.active or 0, job.status.terminating or 0) == (0, 0)

    def pods_gone() -> bool:
        return not core.list_namespaced_pod(namespace, label_selector="job-name=slow").items

    wait_until(pods_gone, DEADLINE)


def test_ttl_after_finished_deletes_the_job_and_its_pods(batch, core, namespace) -> None:
    manifest = job_manifest("short", ["--steps", "1"], ttlSecondsAfterFinished=2)
    batch.create_namespaced_job(namespace, manifest)
    finished(batch, namespace, "short")

    def gone() -> bool:
        jobs = batch.list_namespaced_job(namespace).items
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=short").items
        return not jobs and not pods

    wait_until(gone, DEADLINE)


def test_deleting_a_job_background_deletes_its_pods_and_orphan_keeps_them(
    kubesim_module, batch, core, namespace
) -> None:
    for name in ("bg", "orphan"):
        batch.create_namespaced_job(namespace, job_manifest(name, ["--steps", "200"]))
    for name in ("bg", "orphan"):
        wait_until(
            lambda name=name: (
                core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
            ),
            DEADLINE,
        )
    batch.delete_namespaced_job("bg", namespace, propagation_policy="Background")
    answer = raw_request(
        kubesim_module, "DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/orphan"
    )
    assert "child pods are preserved by default when jobs are deleted" in answer.headers.get(
        "Warning", ""
    )

    def settled() -> bool:
        bg = core.list_namespaced_pod(namespace, label_selector="job-name=bg").items
        kept = core.list_namespaced_pod(namespace, label_selector="job-name=orphan").items
        jobs = batch.list_namespaced_job(namespace).items
        return not bg and not jobs and kept and all(not p.metadata.owner_references for p in kept)

    wait_until(settled, DEADLINE)


def notebook_pod(core: client.CoreV1Api, namespace: str, name: str, token: str) -> None:
    container = {
        "name": "notebook",
        "image": NOTEBOOK,
        "env": [{"name": "JUPYTER_TOKEN", "value": token}],
        "ports": [{"containerPort": 8888}],
    }
    body = {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [container]},
    }
    core.create_namespaced_pod(namespace, body)

    def running() -> bool:
        return core.read_namespaced_pod(name, namespace).status.phase == "Running"

    wait_until(running, DEADLINE)


def test_a_notebook_answers_through_the_pod_proxy(kubesim_module, core, namespace) -> None:
    notebook_pod(core, namespace, "lab", "s3cret")
    base = f"/api/v1/namespaces/{namespace}/pods/lab:8888/proxy"

    version = core.connect_get_namespaced_pod_proxy_with_path("lab:8888", namespace, "api")
    assert "2.14.2" in version  # jupyter_server's version, from GET /api
    without = raw_request(kubesim_module, "GET", f"{base}/lab")
    assert without.status == 302
    assert without.headers["Location"] == f"{base}/login?next=%2Flab"
    assert raw_request(kubesim_module, "GET", f"{base}/api/status").status == 403
    wrong = raw_request(kubesim_module, "GET", f"{base}/lab?token=nope")
    assert wrong.status == 302
    with_token = raw_request(kubesim_module, "GET", f"{base}/lab?token=s3cret")
    assert with_token.status == 200 and b"<title>JupyterLab</title>" in with_token.body
    log = core.read_namespaced_pod_log("lab", namespace)
    assert "Jupyter Server" in log and "/lab?token=s3cret" in log

    closed = raw_request(
        kubesim_module, "GET", f"/api/v1/namespaces/{namespace}/pods/lab:9999/proxy/"
    )
    assert closed.status == 500
    assert "connect: connection refused" in closed.json()["message"]


def test_a_service_proxies_to_a_ready_pod_it_selects(kubesim_module, core, namespace) -> None:
    notebook_pod(core, namespace, "svc-lab", "tok")
    ports = [{"name": "http", "port": 80, "targetPort": 8888}]
    for name, selector in (("lab", {"app": "svc-lab"}), ("nobody", {"app": "none"})):
        body = {"metadata": {"name": name}, "spec": {"selector": selector, "ports": ports}}
        core.create_namespaced_service(namespace, body)
    base = f"/api/v1/namespaces/{namespace}/services"

    def ready() -> Any:
        answer = raw_request(kubesim_module, "GET", f"{base}/lab:80/proxy/api/status?token=tok")
        return answer if answer.status == 200 else None

    assert b'"kernels": 0' in wait_until(ready, DEADLINE).body
    named = raw_request(kubesim_module, "GET", f"{base}/lab:http/proxy/api")
    assert named.status == 200 and b"2.14.2" in named.body
    missing_port = raw_request(kubesim_module, "GET", f"{base}/lab:81/proxy/api")
    assert (missing_port.status, missing_port.json()["message"]) == (
        503,
        'no service port 81 found for service "lab"',
    )
    nobody = raw_request(kubesim_module, "GET", f"{base}/nobody:80/proxy/api")
    assert (nobody.status, nobody.json()["message"]) == (
        503,
        'no endpoints available for service "nobody:80"',
    )


def test_the_pod_proxy_needs_get_on_pods_proxy(kubesim_module, core, namespace) -> None:
    notebook_pod(core, namespace, "rbac-lab", "t")
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    rbac = client.RbacAuthorizationV1Api(api_client(kubesim_module))
    role = {"metadata": {"name": "pods"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}  # fmt: skip
    rbac.create_namespaced_role(namespace, role)
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    }
    rbac.create_namespaced_role_binding(namespace, binding)
    token = service_account_token(kubesim_module, namespace, "reader")
    path = f"/api/v1/namespaces/{namespace}/pods/rbac-lab:8888/proxy/api"

    refused = raw_request(kubesim_module, "GET", path, token=token)
    assert refused.status == 403
    assert 'cannot get resource "pods/proxy"' in refused.json()["message"]

    role["rules"].append({"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]})
    rbac.replace_namespaced_role("pods", namespace, role)
    assert wait_until(lambda: raw_request(kubesim_module, "GET", path, token=token).status == 200)


def test_an_unknown_image_job_pod_fails_to_pull(batch, core, namespace) -> None:
    manifest = job_manifest("missing", [], image="ghcr.io/gpu-portal/no-such-image:1")
    batch.create_namespaced_job(namespace, manifest)

    def pulling_failed() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=missing").items
        statuses = [s for p in pods for s in p.status.container_statuses or []]
        return any(
            s.state.waiting and s.state.waiting.reason in ("ErrImagePull", "ImagePullBackOff")
            for s in statuses
        )

    wait_until(pulling_failed, DEADLINE)
    job = batch.read_namespaced_job("missing", namespace)
    assert job.status.active == 1 and not job.status.failed  # a Pending Pod is active


def test_an_indexed_job_gives_each_pod_its_index(batch, core, namespace) -> None:
    manifest = job_manifest(
        "indexed", ["--steps", "1"], completions=3, parallelism=3, completionMode="Indexed"
    )
    batch.create_namespaced_job(namespace, manifest)

    job = finished(batch, namespace, "indexed")

    assert "Complete" in conditions(job)
    assert (job.status.succeeded, job.status.completed_indexes) == (3, "0-2")
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=indexed").items
    indexes = sorted(
        p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods
    )
    assert indexes == ["0", "1", "2"]
    for pod in pods:
        index = pod.metadata.labels["batch.kubernetes.io/job-completion-index"]
        assert pod.metadata.generate_name == f"indexed-{index}-"
        assert pod.spec.hostname == f"indexed-{index}"
        env = {e.name: e for e in pod.spec.containers[0].env}
        field = env["JOB_COMPLETION_INDEX"].value_from.field_ref.field_path
        assert field == "metadata.labels['batch.kubernetes.io/job-completion-index']"


def test_a_suspended_job_starts_no_pod_until_resumed(batch, core, namespace) -> None:
    batch.create_namespaced_job(namespace, job_manifest("later", ["--steps", "1"], suspend=True))

    def suspended() -> Any:
        job = batch.read_namespaced_job("later", namespace)
        return job if "Suspended" in conditions(job) else None

    job = wait_until(suspended, DEADLINE)
    condition = conditions(job)["Suspended"]
    assert (condition.status, condition.reason, condition.message) == (
        "True",
        "JobSuspended",
        "Job suspended",
    )
    assert not job.status.start_time
    assert not core.list_namespaced_pod(namespace, label_selector="job-name=later").items

    batch.patch_namespaced_job("later", namespace, {"spec": {"suspend": False}})
    job = finished(batch, namespace, "later")

    resumed = conditions(job)["Suspended"]
    assert (resumed.status, resumed.reason) == ("False", "JobResumed")
    assert "Complete" in conditions(job)
    reasons = [reason for _, reason, _ in job_events(core, namespace, "later")]
    assert "Suspended" in reasons and "Resumed" in reasons


def test_a_namespace_with_a_running_job_is_deleted(kubesim_module, batch, core) -> None:
    namespace = create_namespace(kubesim_module, "jobs-gone")
    batch.create_namespaced_job(namespace, job_manifest("busy", ["--steps", "500"]))
    wait_until(
        lambda: core.list_namespaced_pod(namespace, label_selector="job-name=busy").items, DEADLINE
    )

    core.delete_namespace(namespace)

    def gone() -> bool:
        names = [n.metadata.name for n in core.list_namespace().items]
        return namespace not in names

    wait_until(gone, DEADLINE)


def test_pod_security_refuses_a_job_pod_as_any_pod(kubesim_module, batch, core) -> None:
    namespace = create_namespace(kubesim_module, "jobs-restricted")
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.patch_namespace(namespace, {"metadata": {"labels": labels}})
    batch.create_namespaced_job(namespace, job_manifest("loose", ["--steps", "1"]))

    def refused() -> list:
        return [e for e in job_events(core, namespace, "loose") if e[1] == "FailedCreate"]

    (event_type, _, message) = wait_until(refused, DEADLINE)[0]
    assert event_type == "Warning"
    assert message.startswith('Error creating: pods "loose-')
    assert 'is forbidden: violates PodSecurity "restricted:latest": ' in message
    assert not core.list_namespaced_pod(namespace).items


def test_the_pod_proxy_cannot_reach_a_pod_on_an_unreachable_node(kubesim_private) -> None:
    core = client.CoreV1Api(api_client(kubesim_private))
    namespace = create_namespace(kubesim_private, "proxy-fault")
    notebook_pod(core, namespace, "far", "t")
    pod = core.read_namespaced_pod("far", namespace)
    path = f"/api/v1/namespaces/{namespace}/pods/far:8888/proxy/api"
    down = {"node": pod.spec.node_name, "kubelet": "down"}
    kubesim_private.admin("POST", "/_kubesim/faults", down)
    assert raw_request(kubesim_private, "GET", path).status == 200  # the containers still run

    unreachable = {"node": pod.spec.node_name, "kubelet": "unreachable"}
    kubesim_private.admin("POST", "/_kubesim/faults", unreachable)
    answer = raw_request(kubesim_private, "GET", path)

    assert (answer.status, answer.json()["message"]) == (
        500,
        f"error trying to reach service: dial tcp {pod.status.pod_ip}:8888: "
        "connect: no route to host",
    )
    kubesim_private.admin("DELETE", "/_kubesim/faults")
