"""The manifests the portal applies for a request row, as pages show them before and after."""

from __future__ import annotations

import shlex
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from claims.kube import labels as label_keys
from claims.kube import manifests
from claims.kube import workload_manifests as workload_builders
from claims.kube.names import alternative_names
from claims.models import ClaimRequest, TeamMembership, Workload, WorkloadKind


def pod_security_labels() -> dict[str, str]:
    """The Pod Security level an admin sets for the portal's namespaces (enforced, and warned
    of to kubectl users), none when NAMESPACE_POD_SECURITY is empty."""
    level = settings.NAMESPACE_POD_SECURITY
    if not level:
        return {}
    return {label_keys.POD_SECURITY_ENFORCE: level, label_keys.POD_SECURITY_WARN: level}


def namespace_manifest(name: str, labels: dict[str, str]) -> dict:
    """A namespace the portal creates: its own labels, and Pod Security's."""
    return manifests.namespace_manifest(name=name, labels=labels | pod_security_labels())


def claim_manifest(claim: ClaimRequest, api_version: str) -> dict:
    return manifests.resource_claim_manifest(
        api_version=api_version,
        namespace=claim.namespace,
        name=claim.name,
        device_class=claim.device_class,
        count=claim.count,
        all_devices=claim.all_devices,
        selector=claim.selector,
        labels=claim.labels(),
        alternatives=claim_alternatives(claim),
    )


def claim_alternatives(claim: ClaimRequest) -> list[manifests.Alternative]:
    """The claim's prioritized list with the names its subrequests carry (one entry for a
    claim with no further alternatives, which the manifest writes as `exactly`)."""
    wanted = claim.alternatives()
    names = alternative_names(
        [alt.get("gpu_model") or alt.get("mig_profile") or "" for alt in wanted]
    )
    return [
        manifests.Alternative(
            name=name,
            device_class=alt["device_class"],
            count=None if alt.get("all_devices") else alt.get("count"),
            all_devices=bool(alt.get("all_devices")),
            selector=alt.get("selector") or "",
        )
        for name, alt in zip(names, wanted, strict=True)
    ]


def alternative_label(claim: ClaimRequest, position: int) -> str:
    """An alternative as people name it: "alternative 2 (A100-SXM4-40GB)"."""
    alt = claim.alternatives()[position - 1]
    what = alt.get("gpu_model") or alt.get("mig_profile") or alt.get("device_class")
    return _("alternative %(n)d (%(what)s)") % {"n": position, "what": what}


def allocated_alternative_label(claim: ClaimRequest, taken: str) -> str:
    """Which alternative the scheduler took (`taken`, the allocation's `gpu/a100`), in
    words: "gpu/a100: alternative 2 (A100-SXM4-40GB)"; "" when none was."""
    if not taken:
        return ""
    names = [f"{manifests.REQUEST_NAME}/{alt.name}" for alt in claim_alternatives(claim)]
    if taken not in names:
        return taken
    return f"{taken}: {alternative_label(claim, names.index(taken) + 1)}"


def planned_claim_manifest(claim: ClaimRequest) -> dict:
    """The ResourceClaim as the portal applies it, in the version last discovered (for pages)."""
    return claim_manifest(claim, claim.cluster.preferred_resource_version or "v1")


# --- Workloads (claims/domain/services/workloads.py starts them) ---

# Shown in a preview where the token will be: the real one is made at the start.
TOKEN_PLACEHOLDER = "<made when it starts; shown to you only>"


def workload_deadline_seconds(workload: Workload, now: datetime | None = None) -> int | None:
    """A job's or notebook's activeDeadlineSeconds: the profile's, and never past its claim's
    end (at least one second: the API server refuses 0)."""
    seconds = workload.active_deadline_seconds
    expires_at = workload.claim.expires_at
    if expires_at is not None:
        left = int((expires_at - (now or timezone.now())).total_seconds())
        seconds = max(1, left if seconds is None else min(seconds, left))
    if seconds is None and workload.kind == WorkloadKind.JOB:
        seconds = settings.WORKLOAD_MAX_SECONDS
    return seconds


def notebook_host(workload: Workload) -> str:
    """The notebook's Ingress host from NOTEBOOK_HOST_PATTERN, "" without one."""
    pattern = settings.NOTEBOOK_HOST_PATTERN
    if not (pattern and settings.NOTEBOOK_INGRESS_CLASS):
        return ""
    return pattern.format(name=workload.name, namespace=workload.claim.namespace)


def workload_spec(workload: Workload) -> workload_builders.WorkloadSpec:
    claim = workload.claim
    resources = workload.resources or {}
    return workload_builders.WorkloadSpec(
        namespace=claim.namespace,
        name=workload.name,
        claim_name=claim.name,
        labels=workload.labels(),
        image=workload.image,
        command=shlex.split(workload.command),
        args=shlex.split(workload.args),
        env=dict(workload.env or {}),
        requests=dict(resources.get("requests") or {}),
        limits=dict(resources.get("limits") or {}),
        ports=list(workload.ports or []),
        image_pull_secret=claim.cluster.image_pull_secret,
    )


def workload_manifests(
    workload: Workload,
    *,
    token: str = TOKEN_PLACEHOLDER,
    now: datetime | None = None,
    preview: bool = False,
    suspend: bool = False,
    kueue_queue: str = "",
) -> list[dict]:
    """What starting the workload applies, in order: its Job, or its notebook's Pod, Service
    (and Ingress). `preview`: a workload not yet started, which has no id (nor a name) yet.
    `suspend`: its Job waits in the queue (claims/read/queue.py). `kueue_queue`: the
    LocalQueue its Job (or notebook's Pod) is submitted to, on a cluster that runs Kueue."""
    spec = workload_spec(workload)
    if preview:
        spec = replace(spec, labels={**spec.labels, label_keys.WORKLOAD: ""})
    deadline = workload_deadline_seconds(workload, now)
    if workload.kind == WorkloadKind.JOB:
        job = workload_builders.job_manifest(
            spec,
            backoff_limit=workload.backoff_limit,
            active_deadline_seconds=deadline or settings.WORKLOAD_MAX_SECONDS,
            ttl_seconds_after_finished=settings.WORKLOAD_JOB_TTL_SECONDS,
            suspend=suspend,
        )
        if kueue_queue:
            labels = job["metadata"]["labels"]
            job["metadata"]["labels"] = {**labels, label_keys.KUEUE_QUEUE_NAME: kueue_queue}
        return [job]
    documents = workload_builders.notebook_manifests(
        spec,
        token=token,
        active_deadline_seconds=deadline,
        host=notebook_host(workload),
        ingress_class=settings.NOTEBOOK_INGRESS_CLASS,
    )
    if kueue_queue:  # Kueue's pod integration, where on, gates and admits the Pod
        pod = documents[0]
        labels = pod["metadata"]["labels"]
        pod["metadata"]["labels"] = {**labels, label_keys.KUEUE_QUEUE_NAME: kueue_queue}
    return documents


def kueue_queue_of(workload: Workload) -> str:
    """The LocalQueue the workload's Job goes to where Kueue runs: its owner's team's (the team
    they joined first, the one charged for their claims), else KUEUE_LOCAL_QUEUE."""
    membership = (
        TeamMembership.objects.filter(user_id=workload.owner_id)
        .select_related("team")
        .order_by("joined", "id")
        .first()
    )
    named = membership.team.kueue_local_queue if membership else ""
    return named or settings.KUEUE_LOCAL_QUEUE
