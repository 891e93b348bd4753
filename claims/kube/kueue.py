"""Kueue, where the cluster runs it: what its Workloads say, where they wait (its visibility
API), and whether its ClusterQueues can admit the portal's device classes (preflight).

Kueue (kubernetes-sigs/kueue, v1beta2) makes a Workload for every Job labelled
`kueue.x-k8s.io/queue-name`, owned by the Job and labelled with its uid; it admits it in two
steps (QuotaReserved, then Admitted, with `status.admission` naming the ClusterQueue), and
only then unsuspends the Job. A Workload that cannot be admitted has QuotaReserved False with
Kueue's reason in its message; an evicted one has Evicted True (its Job suspended again); a
finished one has Finished True.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from claims.kube import labels as label_keys
from claims.kube.errors import KubeError
from claims.kube.parsing import PreflightCheck
from claims.kube.resources import KUEUE_VERSION, KUEUE_VISIBILITY_GROUP, Obj

PENDING, QUOTA_RESERVED, ADMITTED = "pending", "quota_reserved", "admitted"
EVICTED, FINISHED = "evicted", "finished"
# Kueue's Configuration, where its manifests put it (config/components/manager): the
# deviceClassMappings of its DRA integration are there, and nowhere in the API.
CONFIG_NAMESPACE, CONFIG_MAP, CONFIG_KEY = (
    "kueue-system",
    "kueue-manager-config",
    "controller_manager_config.yaml",
)


@dataclass(frozen=True)
class KueueWorkload:
    """What the portal reads of a Kueue Workload."""

    name: str
    namespace: str
    job_uid: str
    queue: str
    state: str
    message: str
    cluster_queue: str


def _true(conditions: dict[str, Obj], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


def state_of(status: Obj) -> tuple[str, str]:
    """Kueue's state of a Workload from its conditions, and the message that goes with it."""
    conditions = {c.get("type", ""): c for c in status.get("conditions") or []}
    for kind, state in (
        ("Finished", FINISHED),
        ("Admitted", ADMITTED),
        ("QuotaReserved", QUOTA_RESERVED),
        ("Evicted", EVICTED),
    ):
        if _true(conditions, kind):
            return state, conditions[kind].get("message", "")
    return PENDING, conditions.get("QuotaReserved", {}).get("message", "")


def _job_uid(meta: Obj) -> str:
    uid = (meta.get("labels") or {}).get(label_keys.KUEUE_JOB_UID, "")
    if uid:
        return str(uid)
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") in ("Job", "Pod")]
    return str(owners[0].get("uid", "")) if owners else ""


def kueue_workload(obj: Obj) -> KueueWorkload:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    state, message = state_of(status)
    return KueueWorkload(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        job_uid=_job_uid(meta),
        queue=(obj.get("spec") or {}).get("queueName", ""),
        state=state,
        message=message,
        cluster_queue=(status.get("admission") or {}).get("clusterQueue", ""),
    )


def pending_path(namespace: str, local_queue: str) -> str:
    return (
        f"/apis/{KUEUE_VISIBILITY_GROUP}/{KUEUE_VERSION}/namespaces/{namespace}"
        f"/localqueues/{local_queue}/pendingworkloads"
    )


def positions(summary: Obj) -> dict[str, int]:
    """Workload name -> its position in the LocalQueue, from 1 (Kueue counts from 0)."""
    return {
        item["metadata"]["name"]: int(item.get("positionInLocalQueue", 0)) + 1
        for item in summary.get("items") or []
        if (item.get("metadata") or {}).get("name")
    }


# --- preflight: the ClusterQueues behind the LocalQueues, and the DRA mapping ------------


def device_class_mappings(config_map: Obj | None) -> dict[str, str] | None:
    """Device class -> the resource name Kueue counts it as (its Configuration's
    `resources.deviceClassMappings`); None when the Configuration cannot be read."""
    if config_map is None:
        return None
    try:
        config = yaml.safe_load((config_map.get("data") or {}).get(CONFIG_KEY) or "") or {}
    except yaml.YAMLError:
        return None
    mappings = ((config.get("resources") or {}) if isinstance(config, dict) else {}).get(
        "deviceClassMappings"
    ) or []
    return {
        str(device_class): str(mapping.get("name", ""))
        for mapping in mappings
        if isinstance(mapping, dict)
        for device_class in mapping.get("deviceClassNames") or []
    }


def covered_resources(cluster_queue: Obj) -> set[str]:
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    return {str(name) for group in groups for name in group.get("coveredResources") or []}


@dataclass(frozen=True)
class KueueSetup:
    """What preflight read: ClusterQueues by name, the ClusterQueues the LocalQueues point at,
    Kueue's device-class mappings (None: not readable), the device classes offered."""

    cluster_queues: dict[str, Obj]
    used_cluster_queues: set[str]
    mappings: dict[str, str] | None
    device_classes: list[str]
    config_problem: str = ""


def gettext_noop(message: str) -> str:
    return message  # as claims.kube.preflight's: marks a message, this layer has no Django


KUEUE_QUEUES = gettext_noop("Kueue queues")
KUEUE_DRA = gettext_noop("Kueue DRA mapping")
NO_LOCAL_QUEUE = gettext_noop("Kueue runs here, but no LocalQueue exists: a job would wait forever")
QUEUES_MISSING = gettext_noop("LocalQueues point at ClusterQueues that do not exist: %(names)s")
QUEUES_FEED = gettext_noop("LocalQueues feed ClusterQueues %(names)s")
CONFIG_UNREADABLE = gettext_noop(
    "cannot check: Kueue's Configuration (%(config)s) is not readable (%(problem)s); check "
    "that its resources.deviceClassMappings names %(classes)s and that the ClusterQueues "
    "cover those resources"
)
NOT_MAPPED = gettext_noop("%(device_class)s is not in Kueue's deviceClassMappings")
NOT_COVERED = gettext_noop("ClusterQueue %(queue)s does not cover %(resource)s (%(device_class)s)")
CANNOT_READ_QUEUES = gettext_noop("cannot check: the Kueue queues cannot be read (%(problem)s)")
MAPPED = gettext_noop("Kueue counts %(classes)s, and the ClusterQueues cover them")
MESSAGES = (
    CANNOT_READ_QUEUES,
    QUEUES_MISSING,
    QUEUES_FEED,
    CONFIG_UNREADABLE,
    NOT_MAPPED,
    NOT_COVERED,
    MAPPED,
)


def check_queues(setup: KueueSetup) -> PreflightCheck:
    missing = sorted(setup.used_cluster_queues - set(setup.cluster_queues))
    if not setup.used_cluster_queues:
        return PreflightCheck(KUEUE_QUEUES, False, NO_LOCAL_QUEUE)
    if missing:
        return PreflightCheck(KUEUE_QUEUES, False, QUEUES_MISSING % {"names": ", ".join(missing)})
    names = ", ".join(sorted(setup.used_cluster_queues))
    return PreflightCheck(KUEUE_QUEUES, True, QUEUES_FEED % {"names": names})


def _mapping_problems(setup: KueueSetup, mappings: dict[str, str]) -> list[str]:
    problems = []
    for device_class in setup.device_classes:
        resource = mappings.get(device_class)
        if not resource:
            problems.append(NOT_MAPPED % {"device_class": device_class})
            continue
        for queue in sorted(setup.used_cluster_queues & set(setup.cluster_queues)):
            if resource not in covered_resources(setup.cluster_queues[queue]):
                values = {"queue": queue, "resource": resource, "device_class": device_class}
                problems.append(NOT_COVERED % values)
    return problems


def check_dra_mapping(setup: KueueSetup) -> PreflightCheck:
    """Each offered device class is mapped to a resource every used ClusterQueue covers."""
    classes = ", ".join(setup.device_classes) or "-"
    if setup.mappings is None:
        detail = CONFIG_UNREADABLE % {
            "config": f"{CONFIG_NAMESPACE}/{CONFIG_MAP}",
            "problem": setup.config_problem or "not found",
            "classes": classes,
        }
        return PreflightCheck(KUEUE_DRA, False, detail)
    problems = _mapping_problems(setup, setup.mappings)
    if problems:
        return PreflightCheck(KUEUE_DRA, False, "; ".join(problems))
    return PreflightCheck(KUEUE_DRA, True, MAPPED % {"classes": classes})


def preflight_checks(gateway: Any, device_classes: list[str]) -> list[PreflightCheck]:
    try:
        setup = read_setup(gateway, device_classes)
    except KubeError as error:
        detail = CANNOT_READ_QUEUES % {"problem": error.message}
        return [PreflightCheck(KUEUE_QUEUES, False, detail)]
    return [check_queues(setup), check_dra_mapping(setup)]


def read_setup(gateway: Any, device_classes: list[str]) -> KueueSetup:
    """The ClusterQueues, LocalQueues and Kueue's Configuration, as far as they can be read."""
    queues = gateway.list_with_version("ClusterQueue", "")[0]
    local = gateway.list_with_version("LocalQueue", "")[0]
    problem = ""
    try:
        config_map = gateway.read("v1", "ConfigMap", CONFIG_NAMESPACE, CONFIG_MAP)
    except KubeError as error:
        config_map, problem = None, error.message
    return KueueSetup(
        cluster_queues={q["metadata"]["name"]: q for q in queues},
        used_cluster_queues={(q.get("spec") or {}).get("clusterQueue", "") for q in local} - {""},
        mappings=device_class_mappings(config_map),
        device_classes=device_classes,
        config_problem=problem,
    )
