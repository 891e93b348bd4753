"""What the scheduler and the resourceclaim controller write: reservations, bindings, events.

Plain functions over the Store, used by kubesim.controllers.scheduler.
"""

import copy
import secrets
from typing import Any

from kubesim.base.errors import ApiError
from kubesim.registry import events, quota
from kubesim.registry.kinds import kind_for
from kubesim.registry.ownership import (
    CLAIM_CONTROLLER,
    CONTROLLER_MANAGER,
    SCHEDULER,
    record_status_apply,
    record_write,
)
from kubesim.registry.store import now_rfc3339 as now

PODS, CLAIMS = kind_for("", "pods"), kind_for("resource.k8s.io", "resourceclaims")
EVENTS = kind_for("", "events")
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
SCHEDULER_NAME = "default-scheduler"


class ClaimNotReady(Exception):
    """A claim the pod needs does not exist yet; the pod waits without a condition."""


def object_key(obj: dict) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""


def allocation_results(claim: dict | None) -> list[dict]:
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return (allocation.get("devices") or {}).get("results") or []


def claim_names_by_pod_claim(pod: dict) -> dict[str, str]:
    """Each pod claim's ResourceClaim name: a direct one or the one generated from a template
    ("" while not generated yet)."""
    generated = {
        entry.get("name"): entry.get("resourceClaimName")
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    return {
        entry.get("name"): entry.get("resourceClaimName") or generated.get(entry.get("name")) or ""
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []
    }


def _claim_names(pod: dict) -> list[str]:
    """Names of the claims a pod uses: direct ones and those generated from templates."""
    return [name for name in claim_names_by_pod_claim(pod).values() if name]


def extended_claim_name(pod: dict) -> str:
    """The claim the scheduler made for the pod's extended resources ("" if none)."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return status.get("resourceClaimName") or ""


def pod_claims(store: Any, pod: dict) -> list[dict]:
    """Every claim the pod uses, the scheduler's one for extended resources included."""
    found = []
    extended = extended_claim_name(pod)
    for name in _claim_names(pod) + ([extended] if extended else []):
        try:
            found.append(store.get(CLAIMS, pod["metadata"]["namespace"], name))
        except ApiError:
            continue
    return found


def claims_for_pod(store: Any, pod: dict) -> list[dict]:
    """Every claim of the pod, creating template claims first (resourceclaim controller)."""
    pod = _create_template_claims(store, pod)
    names = _claim_names(pod)
    if len(names) != len((pod.get("spec") or {}).get("resourceClaims") or []):
        raise ClaimNotReady(f"pod {object_key(pod)}: ResourceClaim not created yet")
    claims = [c for c in pod_claims(store, pod) if c["metadata"]["name"] in names]
    if len(claims) != len(names):
        raise ClaimNotReady(f"pod {object_key(pod)}: a resourceclaim was not found")
    return claims


def create_extended_claim(store: Any, claim: dict) -> dict:
    """PreBind's Create of the special claim; the API server generates its name."""
    base = claim["metadata"]["generateName"][:58]
    suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    claim["metadata"]["name"] = base + suffix
    CLAIMS.apply_defaults(claim)
    record_write(CLAIMS, None, claim, SCHEDULER)
    with quota.admitting(store, CLAIMS, claim):
        return store.create(CLAIMS, claim)


def record_extended_claim(store: Any, pod: dict, claim_name: str, mappings: list[dict]) -> dict:
    """The scheduler's patch of the pod's status.extendedResourceClaimStatus."""
    pod = store.get(PODS, *object_key(pod))
    before = copy.deepcopy(pod)
    pod.setdefault("status", {})["extendedResourceClaimStatus"] = {
        "requestMappings": mappings,
        "resourceClaimName": claim_name,
    }
    record_write(PODS, before, pod, SCHEDULER, "status")
    return store.update(PODS, pod)


def _create_template_claims(store: Any, pod: dict) -> dict:
    namespace = pod["metadata"]["namespace"]
    statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
    done = {entry.get("name") for entry in statuses}
    templates = kind_for("resource.k8s.io", "resourceclaimtemplates")
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        template_name = entry.get("resourceClaimTemplateName")
        if not template_name or entry.get("name") in done:
            continue
        try:
            template = store.get(templates, namespace, template_name)
        except ApiError:
            continue
        generated = _generated_claim(pod, entry["name"], template)
        record_write(CLAIMS, None, generated, CONTROLLER_MANAGER)
        try:
            with quota.admitting(store, CLAIMS, generated):
                claim = store.create(CLAIMS, generated)
        except ApiError as error:
            if error.code != 403:
                raise
            continue  # over the namespace's quota: the pod waits, as the controller retries
        statuses.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
    if len(statuses) == len(done):
        return pod
    before = copy.deepcopy(pod)
    pod.setdefault("status", {})["resourceClaimStatuses"] = statuses
    applied = {"status": {"resourceClaimStatuses": statuses}}
    record_status_apply(PODS, before, pod, applied, CLAIM_CONTROLLER)
    return store.update(PODS, pod, check_rv=False)


def _generated_claim(pod: dict, pod_claim_name: str, template: dict) -> dict:
    """A claim named <pod>-<claim>-<5 random>, owned by the pod, as K-RCC creates it."""
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    base = f"{pod['metadata']['name']}-{pod_claim_name}"[:57]
    suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata = {
        "name": f"{base}-{suffix}",
        "generateName": f"{base}-",
        "namespace": pod["metadata"]["namespace"],
        **({"labels": dict(template_meta["labels"])} if template_meta.get("labels") else {}),
        "annotations": {
            **(template_meta.get("annotations") or {}),
            POD_CLAIM_ANNOTATION: pod_claim_name,
        },
        "ownerReferences": [owner],
    }
    spec = (template.get("spec") or {}).get("spec") or {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": spec,
    }


def reserve(
    store: Any, claim: dict, pod: dict, node: str, results: list[dict] | None, with_timestamp: bool
) -> dict:
    """Allocate (when `results` are new) and reserve the claim for the pod (K-SCHED bindClaim)."""
    claim = store.get(CLAIMS, *object_key(claim))
    if results is not None and FINALIZER not in claim["metadata"].get("finalizers", []):
        claim = _protect(store, claim)
    before = copy.deepcopy(claim)
    status = claim.setdefault("status", {})
    if results is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation: dict = {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [term]},
        }
        if with_timestamp:
            allocation["allocationTimestamp"] = now()
        status["allocation"] = allocation
    consumer = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    reserved = status.setdefault("reservedFor", [])
    if all(entry.get("uid") != consumer["uid"] for entry in reserved):
        reserved.append(consumer)
    record_write(CLAIMS, before, claim, SCHEDULER, "status")
    return store.update(CLAIMS, claim)


def _protect(store: Any, claim: dict) -> dict:
    """The scheduler's own Update that adds the finalizer before it writes the allocation."""
    before = copy.deepcopy(claim)
    claim["metadata"].setdefault("finalizers", []).append(FINALIZER)
    record_write(CLAIMS, before, claim, SCHEDULER)
    return store.update(CLAIMS, claim)


def _deallocate(claim: dict) -> None:
    """No consumer left: clear the allocation and drop the finalizer (K-RCC)."""
    status = claim.setdefault("status", {})
    status.pop("reservedFor", None)
    status.pop("allocation", None)
    finalizers = [f for f in claim["metadata"].get("finalizers") or [] if f != FINALIZER]
    if finalizers:
        claim["metadata"]["finalizers"] = finalizers
    else:
        claim["metadata"].pop("finalizers", None)


def release_claim(store: Any, claim: dict, live_uids: set[str]) -> dict | None:
    """Drop consumers that are gone; deallocate when none is left (K-RCC)."""
    status = claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    keep = [entry for entry in reserved if entry.get("uid") in live_uids]
    finalizers = claim["metadata"].get("finalizers") or []
    held = reserved or status.get("allocation") or FINALIZER in finalizers
    if keep == reserved and (keep or not held):
        return None
    before = copy.deepcopy(claim)
    if keep:
        claim["status"]["reservedFor"] = keep
    else:
        _deallocate(claim)
    record_write(CLAIMS, before, claim, CONTROLLER_MANAGER, "status")
    try:
        return store.update(CLAIMS, claim)
    except ApiError:
        return None


def unreserve(store: Any, claim: dict, pod: dict) -> dict | None:
    uid = pod["metadata"]["uid"]
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    if all(entry.get("uid") != uid for entry in reserved):
        return None
    live = {entry.get("uid") for entry in reserved} - {uid}
    return release_claim(store, claim, live)


def delete_generated_claims(store: Any, pod: dict) -> None:
    """Template claims go away with their pod once it is done or deleted (K-RCC)."""
    for claim in pod_claims(store, pod):
        owners = claim["metadata"].get("ownerReferences") or []
        if any(owner.get("uid") == pod["metadata"]["uid"] for owner in owners):
            try:
                store.delete(CLAIMS, *object_key(claim))
            except ApiError:
                continue


def _set_condition(pod: dict, condition: dict) -> bool:
    """Put the PodScheduled condition on the pod; False if it already says the same."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            same = all(existing.get(k) == condition.get(k) for k in ("status", "reason", "message"))
            if same:
                return False
            conditions[index] = condition
            return True
    conditions.append(condition)
    return True


def mark_unschedulable(store: Any, pod: dict, message: str, reason: str = "Unschedulable") -> None:
    """PodScheduled False with the reason (Unschedulable, or SchedulerError when a plugin
    failed) and a FailedScheduling event, as handleSchedulingFailure writes them."""
    condition = {
        "type": "PodScheduled",
        "observedGeneration": pod["metadata"].get("generation", 1),
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
        "reason": reason,
        "message": message,
    }
    before = copy.deepcopy(pod)
    if not _set_condition(pod, condition):
        return
    record_write(PODS, before, pod, SCHEDULER, "status")
    event = _scheduler_event(pod, "Warning", "FailedScheduling", "Scheduling", message)
    store.update(PODS, pod)
    store.create(EVENTS, event)


def bind(store: Any, pod: dict, node: str) -> None:
    pod = store.get(PODS, *object_key(pod))
    pod["spec"]["nodeName"] = node
    condition = {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
    }
    _set_condition(pod, condition)
    message = (
        f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}"
    )
    event = _scheduler_event(pod, "Normal", "Scheduled", "Binding", message)
    store.update(PODS, pod)
    store.create(EVENTS, event)


def _scheduler_event(pod: dict, event_type: str, reason: str, action: str, note: str) -> dict:
    """An Event as the scheduler's events.k8s.io recorder writes it, about the Pod as the
    scheduler saw it (before its own write), named before the kubelet can record anything."""
    return events.scheduler_event(_involved(pod), event_type, reason, action, note)


def _involved(pod: dict) -> dict:
    metadata = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "uid": metadata["uid"],
        "resourceVersion": metadata.get("resourceVersion", ""),
    }


def record_event(
    store: Any,
    pod: dict,
    event_type: str,
    reason: str,
    message: str,
    component: str = SCHEDULER_NAME,
) -> dict:
    """A core/v1 Event about the pod, named <pod>.<hex> like client-go's recorder."""
    metadata = pod["metadata"]
    stamp = now()
    name = f"{metadata['name']}.{events.unique_nanoseconds():x}"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": metadata["namespace"]},
        "involvedObject": _involved(pod),
        "type": event_type,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    return store.create(EVENTS, event)
