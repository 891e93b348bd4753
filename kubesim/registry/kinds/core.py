"""Defaulting and validation of the core/v1 kinds kubesim serves."""

import copy
import secrets
from typing import Any

from kubesim.registry.validation import (
    DUPLICATE,
    INVALID,
    NOT_FOUND,
    REQUIRED,
    UNSUPPORTED,
    FieldError,
    dns_label_errors,
    dns_subdomain_errors,
    metadata_name_errors,
)

RESTART_POLICIES = ("Always", "Never", "OnFailure")
POD_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("restartPolicy", "Always"),
    ("dnsPolicy", "ClusterFirst"),
    ("schedulerName", "default-scheduler"),
    ("terminationGracePeriodSeconds", 30),
    ("securityContext", {}),
    ("enableServiceLinks", True),
)
# Set by the Priority and ServiceAccount admission plugins, after the field manager ran.
POD_ADMISSION_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("priority", 0),
    ("preemptionPolicy", "PreemptLowerPriority"),
    ("serviceAccountName", "default"),
)
# Added by the DefaultTolerationSeconds admission plugin unless the pod tolerates the key.
NOT_READY_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def default_namespace(obj: dict) -> None:
    metadata = obj.setdefault("metadata", {})
    if isinstance(metadata.get("name"), str) and metadata["name"]:
        metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _pull_policy(image: str) -> str:
    tag = image.rsplit("/", 1)[-1]
    if "@" in tag:
        return "IfNotPresent"
    if ":" not in tag or tag.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_container(container: dict) -> None:
    container.setdefault("imagePullPolicy", _pull_policy(str(container.get("image") or "")))
    resources = container.setdefault("resources", {})
    # SetDefaults_Pod: "If limits are specified, but requests are not, default requests to
    # limits" (per resource), as for `nvidia.com/gpu: 1` asked for under limits only.
    limits = resources.get("limits") if isinstance(resources, dict) else None
    if isinstance(limits, dict) and limits:
        requests = resources.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, quantity in limits.items():
                requests.setdefault(name, quantity)
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")


def default_pod(obj: dict) -> None:
    default_pod_as_decoded(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return  # validation reports the wrong type
    for key, value in POD_ADMISSION_DEFAULTS:
        spec.setdefault(key, value)
    spec.setdefault("serviceAccount", spec["serviceAccountName"])  # the deprecated alias
    default_tolerations(spec)


def default_pod_as_decoded(obj: dict) -> None:
    """The defaults of the Pod's decoding (SetDefaults_Pod), without admission's."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return  # validation reports the wrong type
    for key, value in POD_DEFAULTS:
        spec.setdefault(key, value)
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else []:
        if isinstance(container, dict):
            default_container(container)
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", "BestEffort")
        default_conditions(status.get("conditions"))


def default_conditions(conditions: Any) -> None:
    """A PodCondition's times are metav1.Time structs: unset, they are written as null."""
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict):
            condition.setdefault("lastProbeTime", None)
            condition.setdefault("lastTransitionTime", None)


def default_tolerations(spec: dict) -> None:
    tolerations = spec.setdefault("tolerations", [])
    if not isinstance(tolerations, list):
        return  # validation reports the wrong type
    tolerated = {
        t.get("key") or ""
        for t in tolerations
        if isinstance(t, dict) and t.get("effect", "") in ("", "NoExecute")
    }
    for key in NOT_READY_KEYS:
        if key not in tolerated and "" not in tolerated:
            toleration = {"key": key, "operator": "Exists", "effect": "NoExecute"}
            tolerations.append({**toleration, "tolerationSeconds": 300})


TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SOURCES = (
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {
        "downwardAPI": {
            "items": [
                {
                    "path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                }
            ]
        }
    },
)


def admit_pod(obj: dict) -> None:
    """On create, as the ServiceAccount admission plugin: mount the API token volume."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("automountServiceAccountToken") is False:
        return
    containers, volumes = spec.get("containers"), spec.setdefault("volumes", [])
    if not isinstance(containers, list) or not isinstance(volumes, list):
        return  # validation reports the wrong type
    suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    name = f"kube-api-access-{suffix}"
    projected = {"defaultMode": 420, "sources": copy.deepcopy(list(TOKEN_SOURCES))}
    volumes.append({"name": name, "projected": projected})
    for container in containers:
        mounts = container.setdefault("volumeMounts", []) if isinstance(container, dict) else None
        if isinstance(mounts, list) and not any(
            isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts
        ):
            mounts.append({"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH})


def default_nothing(obj: dict) -> None:
    return None


def validate_namespace(obj: dict, old: dict | None) -> list[FieldError]:
    return metadata_name_errors(obj, label=True)


def validate_named(obj: dict, old: dict | None) -> list[FieldError]:
    return metadata_name_errors(obj)


def _claim_names_detail(claim_names: set[str | None]) -> str:
    if not claim_names:
        return "must be one of the names in pod.spec.resourceClaims which is empty"
    listed = ", ".join(sorted(n for n in claim_names if n))
    return f"must be one of the names in pod.spec.resourceClaims: {listed}"


def container_claim_errors(
    container: dict, claim_names: set[str | None], path: str
) -> list[FieldError]:
    errors, seen = [], set()
    for index, claim in enumerate((container.get("resources") or {}).get("claims") or []):
        field = f"{path}.resources.claims[{index}]"
        name = (claim or {}).get("name")
        if not name:
            errors.append(FieldError(REQUIRED, f"{field}.name"))
        elif name not in claim_names:
            errors.append(FieldError(NOT_FOUND, field, name, _claim_names_detail(claim_names)))
        key = (name, (claim or {}).get("request") or "")
        if name and key in seen:
            errors.append(FieldError(DUPLICATE, field, name))
        seen.add(key)
    return errors


def containers_errors(containers: Any, claim_names: set[str | None]) -> list[FieldError]:
    if not containers:
        return [FieldError(REQUIRED, "spec.containers")]
    errors, seen = [], set()
    for index, container in enumerate(containers):
        path = f"spec.containers[{index}]"
        container = container if isinstance(container, dict) else {}
        name = container.get("name")
        errors += dns_label_errors(name, f"{path}.name")
        if name and name in seen:
            errors.append(FieldError(DUPLICATE, f"{path}.name", name))
        seen.add(name)
        if not container.get("image"):
            errors.append(FieldError(REQUIRED, f"{path}.image"))
        errors += container_claim_errors(container, claim_names, path)
    return errors


def pod_claim_errors(claims: Any) -> tuple[list[FieldError], set[str | None]]:
    errors: list[FieldError] = []
    names: set[str | None] = set()
    for index, claim in enumerate(claims or []):
        path = f"spec.resourceClaims[{index}]"
        claim = claim if isinstance(claim, dict) else {}
        name = claim.get("name")
        errors += dns_label_errors(name, f"{path}.name")
        if name in names:
            errors.append(FieldError(DUPLICATE, f"{path}.name", name))
        names.add(name)
        sources = [
            key for key in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(key)
        ]
        if not sources:
            detail = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            errors.append(FieldError(INVALID, path, claim, detail))
        elif len(sources) == 2:
            detail = (
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
            )
            errors.append(FieldError(INVALID, path, claim, detail))
        for key in sources:
            errors += dns_subdomain_errors(claim[key], f"{path}.{key}")
    return errors, names


def validate_pod(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = metadata_name_errors(obj)
    claim_errors, claim_names = pod_claim_errors(spec.get("resourceClaims"))
    errors += claim_errors
    errors += containers_errors(spec.get("containers"), claim_names)
    policy = spec.get("restartPolicy")
    if policy not in RESTART_POLICIES:
        detail = 'supported values: "Always", "OnFailure", "Never"'
        errors.append(FieldError(UNSUPPORTED, "spec.restartPolicy", policy, detail))
    errors += deadline_errors(spec.get("activeDeadlineSeconds"), 1)
    if old is not None:
        errors += pod_update_errors(obj, old)
    return errors


MAX_INT32 = 2**31 - 1
DEADLINE = "spec.activeDeadlineSeconds"


def deadline_errors(value: Any, lowest: int) -> list[FieldError]:
    """activeDeadlineSeconds in range (1 on create, 0 on update, as ValidatePodSpec/Update)."""
    if not isinstance(value, int) or isinstance(value, bool) or lowest <= value <= MAX_INT32:
        return []
    detail = f"must be between {lowest} and {MAX_INT32}, inclusive"
    return [FieldError(INVALID, DEADLINE, value, detail)]


def deadline_update_errors(new: Any, old: Any) -> list[FieldError]:
    """A deadline may be set or shortened on update, never lengthened or removed."""
    if new is None:
        detail = "must not update from a positive integer to nil value"
        return [] if old is None else [FieldError(INVALID, DEADLINE, None, detail)]
    errors = deadline_errors(new, 0)
    if not errors and isinstance(old, int) and isinstance(new, int) and old < new:
        detail = "must be less than or equal to previous value"
        errors.append(FieldError(INVALID, DEADLINE, new, detail))
    return errors


def pod_update_errors(obj: dict, old: dict) -> list[FieldError]:
    """Pod spec updates may only change images (and set nodeName once, via binding)."""
    new_spec, old_spec = dict(obj.get("spec") or {}), dict(old.get("spec") or {})
    errors = deadline_update_errors(
        new_spec.pop("activeDeadlineSeconds", None), old_spec.pop("activeDeadlineSeconds", None)
    )
    if not old_spec.get("nodeName"):
        new_spec.pop("nodeName", None)
        old_spec.pop("nodeName", None)
    for spec in (new_spec, old_spec):
        spec["containers"] = [
            {**c, "image": ""} for c in spec.get("containers") or [] if isinstance(c, dict)
        ]
    if new_spec == old_spec:
        return errors
    detail = "pod updates may not change fields other than `spec.containers[*].image`"
    return [*errors, FieldError("Forbidden", "spec", detail=detail)]
