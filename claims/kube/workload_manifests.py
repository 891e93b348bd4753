"""Pure functions building the manifests of workloads on a claim: a batch Job, or a
notebook's Pod, Service and Ingress, as plain dicts."""

import copy
from dataclasses import dataclass, field, replace

from claims.kube import labels as label_keys
from claims.kube.manifests import (
    MANAGED_BY_LABELS,
    POD_CLAIM_NAME,
    POD_SECURITY,
    Manifest,
    claim_using_container,
    object_metadata,
)

WORKLOAD_CONTAINER = "main"
# The Jupyter images run as jovyan (uid 1000, group users 100) and keep their home there.
NOTEBOOK_POD_SECURITY = {**POD_SECURITY, "runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100}
NOTEBOOK_PORT = 8888
NOTEBOOK_TOKEN_ENV = "JUPYTER_TOKEN"
# Exit codes that mean the program is wrong, not unlucky: retrying cannot help (1 an uncaught
# error, 2 bad usage, 126 not executable, 127 command not found). Signals (137 OOM-killed,
# 143 terminated) are retried up to backoffLimit.
BUG_EXIT_CODES = (1, 2, 126, 127)


@dataclass(frozen=True)
class WorkloadSpec:
    """What one container using the claim runs, already checked (claims.policy.workloads)."""

    namespace: str
    name: str
    claim_name: str
    labels: dict[str, str]
    image: str
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    image_pull_secret: str = ""


def _workload_container(spec: WorkloadSpec) -> Manifest:
    container = claim_using_container(WORKLOAD_CONTAINER, spec.image)
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.env:
        container["env"] = [{"name": name, "value": value} for name, value in spec.env.items()]
    if spec.ports:
        container["ports"] = [{"containerPort": port, "protocol": "TCP"} for port in spec.ports]
    resources = container["resources"]
    if spec.requests:
        resources["requests"] = dict(spec.requests)
    if spec.limits:
        resources["limits"] = dict(spec.limits)
    return container


def _workload_pod_spec(spec: WorkloadSpec, pod_security: Manifest) -> Manifest:
    """Every container shares the claim, as the seed's pod1 does."""
    pod_spec: Manifest = {
        "restartPolicy": "Never",
        "securityContext": copy.deepcopy(pod_security),
        "resourceClaims": [{"name": POD_CLAIM_NAME, "resourceClaimName": spec.claim_name}],
        "containers": [_workload_container(spec)],
    }
    if spec.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    return pod_spec


def job_manifest(
    spec: WorkloadSpec,
    *,
    backoff_limit: int,
    active_deadline_seconds: int,
    ttl_seconds_after_finished: int,
    suspend: bool = False,
) -> Manifest:
    """A batch/v1 Job of one Pod on the claim. A bug fails the Job at once (podFailurePolicy
    FailJob on BUG_EXIT_CODES); a Pod evicted or preempted (DisruptionTarget) does not count
    against backoffLimit; the Job ends by activeDeadlineSeconds at the latest (the claim's
    end) and is removed ttlSecondsAfterFinished after it finished. `suspend`: created
    suspended (no Pod until resumed) while its claim waits in the portal's queue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_metadata(spec.name, spec.labels, spec.namespace),
        "spec": {
            "backoffLimit": backoff_limit,
            "activeDeadlineSeconds": active_deadline_seconds,
            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
            **({"suspend": True} if suspend else {}),
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": WORKLOAD_CONTAINER,
                            "operator": "In",
                            "values": list(BUG_EXIT_CODES),
                        },
                    },
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    },
                ]
            },
            "template": {
                "metadata": {"labels": {**MANAGED_BY_LABELS, **spec.labels}},
                "spec": _workload_pod_spec(spec, POD_SECURITY),
            },
        },
    }


def notebook_pod_manifest(
    spec: WorkloadSpec, *, token: str, active_deadline_seconds: int | None
) -> Manifest:
    """The notebook's long-running Pod; its access token comes in NOTEBOOK_TOKEN_ENV."""
    with_token = replace(spec, env={**spec.env, NOTEBOOK_TOKEN_ENV: token})
    pod_spec = _workload_pod_spec(with_token, NOTEBOOK_POD_SECURITY)
    if active_deadline_seconds is not None:
        pod_spec["activeDeadlineSeconds"] = active_deadline_seconds
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": object_metadata(spec.name, spec.labels, spec.namespace),
        "spec": pod_spec,
    }


def notebook_service_manifest(spec: WorkloadSpec) -> Manifest:
    """A ClusterIP Service in front of the notebook's Pod (selected by its workload label)."""
    ports = spec.ports or [NOTEBOOK_PORT]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(spec.name, spec.labels, spec.namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": {label_keys.WORKLOAD: spec.labels[label_keys.WORKLOAD]},
            "ports": [
                {"name": f"port-{port}", "port": port, "targetPort": port, "protocol": "TCP"}
                for port in ports
            ],
        },
    }


def notebook_ingress_manifest(spec: WorkloadSpec, *, host: str, ingress_class: str) -> Manifest:
    """An Ingress for the notebook's first port at `host`."""
    port = (spec.ports or [NOTEBOOK_PORT])[0]
    backend = {"service": {"name": spec.name, "port": {"number": port}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": object_metadata(spec.name, spec.labels, spec.namespace),
        "spec": {
            "ingressClassName": ingress_class,
            "rules": [
                {
                    "host": host,
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


def notebook_manifests(
    spec: WorkloadSpec,
    *,
    token: str,
    active_deadline_seconds: int | None,
    host: str = "",
    ingress_class: str = "",
) -> list[Manifest]:
    """Pod, Service, and the Ingress when a host and an ingress class are given."""
    documents = [
        notebook_pod_manifest(spec, token=token, active_deadline_seconds=active_deadline_seconds),
        notebook_service_manifest(spec),
    ]
    if host and ingress_class:
        documents.append(notebook_ingress_manifest(spec, host=host, ingress_class=ingress_class))
    return documents
