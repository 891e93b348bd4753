"""The workload and networking kinds the portal's own manifests (deploy/) hold: apps/v1
Deployments, batch/v1 Jobs, core/v1 Services, networking.k8s.io/v1 Ingresses and policy/v1
PodDisruptionBudgets. Stored, defaulted and validated (the checks below, with upstream's
messages, plus the strict schema every kind gets), so `kubectl apply --server-side` of the
portal's manifests meets what a real API server would say. Jobs are run by the Job controller
(kubesim/controllers/jobs.py) and get their generated selector and labels from the uid; no
controller runs the others: a Deployment makes no Pods, a Service gets a cluster IP and no
endpoints. Not done: the scale subresource, the printed Go value in an
"field is immutable" error of a Job's template (kubesim names the field only), tables.
"""

from __future__ import annotations

import hashlib
import ipaddress

from kubesim.registry.kinds.core import default_pod_as_decoded, validate_pod
from kubesim.registry.validation import (
    FORBIDDEN,
    INVALID,
    REQUIRED,
    UNSUPPORTED,
    FieldError,
    metadata_name_errors,
)

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kubeadm's default service range
IMMUTABLE = "field is immutable"


def _template_spec_defaults(spec: dict) -> None:
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    pod = {"spec": template.get("spec") if isinstance(template.get("spec"), dict) else {}}
    default_pod_as_decoded(pod)  # SetDefaults_PodSpec applies to templates too
    template["spec"] = pod["spec"]
    metadata = template.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.setdefault("creationTimestamp", None)


def default_deployment(obj: dict) -> None:
    """apps/v1 SetDefaults_Deployment."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template_spec_defaults(spec)
    obj.setdefault("status", {})


def default_job(obj: dict) -> None:
    """batch/v1 SetDefaults_Job."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    # A pod failure policy makes Failed the default (SetDefaults_Job).
    replacement = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    spec.setdefault("podReplacementPolicy", replacement)
    _template_spec_defaults(spec)
    obj.setdefault("status", {})


JOB_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "controller-uid",
    "job-name",
)


def generate_job_selector(obj: dict) -> None:
    """The Job strategy's generateSelector (pkg/registry/batch/job/strategy.go): without
    spec.manualSelector the Pod template gets the Job's uid and name as labels (kept when
    already set) and the selector is its batch.kubernetes.io/controller-uid."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid", ""), meta.get("name", "")
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    labels = template_meta.get("labels") or {}
    for key, value in zip(JOB_LABELS, (uid, name, uid, name), strict=True):
        labels.setdefault(key, value)
    template_meta["labels"] = labels
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {JOB_LABELS[0]: uid}}


def _cluster_ip(obj: dict) -> str:
    """A stable address in the service range for this Service (the allocator's choice)."""
    meta = obj.get("metadata") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}".encode()
    offset = int.from_bytes(hashlib.sha256(key).digest()[:4]) % (SERVICE_CIDR.num_addresses - 2)
    return str(SERVICE_CIDR.network_address + 1 + offset)


def default_service(obj: dict) -> None:
    """core/v1 SetDefaults_Service, and the cluster IP the allocator gives a new one."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("clusterIP"):
        spec["clusterIP"] = _cluster_ip(obj)
    if spec.get("clusterIP") and spec["clusterIP"] != "None":
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    obj.setdefault("status", {"loadBalancer": {}})


def default_ingress(obj: dict) -> None:
    obj.setdefault("status", {"loadBalancer": {}})


def default_pdb(obj: dict) -> None:
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
            status.setdefault(key, 0)


RESTART_POLICY = "spec.template.spec.restartPolicy"


def _template_errors(spec: dict, policies: tuple[str, ...]) -> list[FieldError]:
    """The Pod template's spec checked as a Pod's, its paths under spec.template."""
    template = spec.get("template") or {}
    pod = {"metadata": {"name": "template"}, "spec": template.get("spec") or {}}
    found = [
        FieldError(e.type, "spec.template." + e.field, e.value, e.detail)
        for e in validate_pod(pod, None)
        if e.field != "spec.restartPolicy"
    ]
    policy = (template.get("spec") or {}).get("restartPolicy")
    listed = ", ".join(f'"{p}"' for p in policies)
    if policy in (None, "", "Always") and "Always" not in policies:
        # A Job's: defaulting makes an unset policy Always, so both mean "not given".
        found.append(FieldError(REQUIRED, RESTART_POLICY, detail=f"valid values: {listed}"))
    elif policy not in policies:
        found.append(FieldError(UNSUPPORTED, RESTART_POLICY, policy, f"supported values: {listed}"))
    return found


def _selector_errors(spec: dict, what: str) -> list[FieldError]:
    selector = spec.get("selector")
    if not selector:
        return [FieldError(REQUIRED, "spec.selector")]
    match = selector.get("matchLabels") or {}
    if not match and not selector.get("matchExpressions"):
        detail = f"empty selector is invalid for {what}"
        return [FieldError(INVALID, "spec.selector", selector, detail)]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not match.items() <= labels.items():
        detail = "`selector` does not match template `labels`"
        return [FieldError(INVALID, "spec.template.metadata.labels", labels, detail)]
    return []


def validate_deployment(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    found = metadata_name_errors(obj) + _selector_errors(spec, "deployment")
    found += _template_errors(spec, ("Always",))
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        detail = "must be greater than or equal to 0"
        found.append(FieldError(INVALID, "spec.replicas", replicas, detail))
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate" and strategy.get("rollingUpdate"):
        detail = "may not be specified when strategy `type` is 'Recreate'"
        found.append(FieldError(FORBIDDEN, "spec.strategy.rollingUpdate", detail=detail))
    if old is not None and spec.get("selector") != (old.get("spec") or {}).get("selector"):
        found.append(FieldError(INVALID, "spec.selector", spec.get("selector"), IMMUTABLE))
    return found


def validate_job(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    found = metadata_name_errors(obj) + _template_errors(spec, ("OnFailure", "Never"))
    if old is not None and spec.get("template") != (old.get("spec") or {}).get("template"):
        # A Job's Pod template never changes (only a suspended Job's scheduling fields may).
        found.append(FieldError(INVALID, "spec.template", detail=IMMUTABLE))
    return found


def validate_service(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    found = metadata_name_errors(obj)
    ports = spec.get("ports") or []
    if not ports and spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None":
        found.append(FieldError(REQUIRED, "spec.ports"))
    for index, port in enumerate(ports):
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            detail = "must be between 1 and 65535, inclusive"
            found.append(FieldError(INVALID, f"spec.ports[{index}].port", number, detail))
        if len(ports) > 1 and not port.get("name"):
            found.append(FieldError(REQUIRED, f"spec.ports[{index}].name"))
    if old is not None:
        before = (old.get("spec") or {}).get("clusterIP")
        if spec.get("clusterIP") != before:
            found.append(FieldError(INVALID, "spec.clusterIPs[0]", spec.get("clusterIP"),
                                    "may not change once set"))  # fmt: skip
    return found


def validate_ingress(obj: dict, old: dict | None) -> list[FieldError]:
    found = metadata_name_errors(obj)
    for r, rule in enumerate((obj.get("spec") or {}).get("rules") or []):
        for p, path in enumerate((rule.get("http") or {}).get("paths") or []):
            field = f"spec.rules[{r}].http.paths[{p}]"
            if not path.get("pathType"):
                detail = "pathType must be specified"
                found.append(FieldError(REQUIRED, f"{field}.pathType", detail=detail))
            elif path["pathType"] in ("Exact", "Prefix") and not path.get("path", "").startswith(
                "/"
            ):
                detail = "must be an absolute path"
                found.append(FieldError(INVALID, f"{field}.path", path.get("path", ""), detail))
    return found


def validate_pdb(obj: dict, old: dict | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    found = metadata_name_errors(obj)
    if "minAvailable" in spec and "maxUnavailable" in spec:
        detail = "minAvailable and maxUnavailable cannot be both set"
        found.append(FieldError(INVALID, "spec", spec, detail))
    return found
