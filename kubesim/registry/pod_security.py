"""Pod Security admission (k8s.io/pod-security-admission), for Pod and workload creates. Each
of its three modes takes its level from the namespace's `pod-security.kubernetes.io/<mode>`
label, else from the cluster's default (privileged unless the topology says
`pod_security: {enforce: ..., warn: ..., audit: ...}`), as upstream's admission.go does:

- enforce (Pods only): a Pod that violates the level is refused with upstream's message,

    pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation
    != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ...

- warn: an admitted Pod, or a workload whose Pod template violates the level, comes back with a
  `Warning: 299 - "would violate PodSecurity \"restricted:latest\": ..."` header (none on a
  refused request);
- audit: the request's audit event gets `pod-security.kubernetes.io/audit-violations` with the
  same words (and Pods `pod-security.kubernetes.io/enforce-policy`), kept in an AuditLog.

The checks are upstream's (policy/check_*.go) for what a Pod like the portal's can carry:
baseline's privileged, host namespaces, hostPath volumes and host ports; restricted's
allowPrivilegeEscalation, capabilities, runAsNonRoot, runAsUser and seccompProfile. Upstream's
other baseline checks (AppArmor, SELinux, /proc mount, sysctls, Windows host process) and the
restricted volume types are not modelled, nor are the exemptions of an AdmissionConfiguration.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.base import errors

LEVELS = ("privileged", "baseline", "restricted")
MODES = ("enforce", "warn", "audit")
PREFIX = "pod-security.kubernetes.io/"
ENFORCE = PREFIX + "enforce"
ENFORCE_VERSION = PREFIX + "enforce-version"
AUDIT_VIOLATIONS = PREFIX + "audit-violations"
ENFORCE_POLICY = PREFIX + "enforce-policy"
# Where a workload kind keeps the Pod it makes (upstream's DefaultPodSpecExtractor).
TEMPLATE_PATHS = {
    "deployments": ("spec", "template"),
    "replicasets": ("spec", "template"),
    "statefulsets": ("spec", "template"),
    "daemonsets": ("spec", "template"),
    "jobs": ("spec", "template"),
    "replicationcontrollers": ("spec", "template"),
    "cronjobs": ("spec", "jobTemplate", "spec", "template"),
    "podtemplates": ("template",),
}
KEPT_AUDIT_EVENTS = 10_000
ALLOWED_ADDED_CAPABILITIES = ("NET_BIND_SERVICE",)
Obj = dict[str, Any]


def _containers(spec: Obj) -> list[Obj]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _quoted(names: list[str], word: str = "container") -> str:
    """`container "a"` or `containers "a", "b"`, as upstream's pluralize + joinQuote."""
    word = word if len(names) == 1 else word + "s"
    return f"{word} " + ", ".join(f'"{name}"' for name in names)


def _context(container: Obj) -> Obj:
    return container.get("securityContext") or {}


def _privileged(spec: Obj) -> str | None:
    bad = [c["name"] for c in _containers(spec) if _context(c).get("privileged") is True]
    if bad:
        return f"privileged ({_quoted(bad)} must not set securityContext.privileged=true)"
    return None


def _host_namespaces(spec: Obj) -> str | None:
    set_ = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    return f"host namespaces ({', '.join(set_)})" if set_ else None


def _host_path_volumes(spec: Obj) -> str | None:
    bad = [v["name"] for v in spec.get("volumes", []) if "hostPath" in v]
    return f"hostPath volumes ({_quoted(bad, 'volume')})" if bad else None


def _host_ports(spec: Obj) -> str | None:
    names, ports = [], []
    for container in _containers(spec):
        used = [p["hostPort"] for p in container.get("ports", []) if p.get("hostPort")]
        if used:
            names.append(container["name"])
            ports += [str(port) for port in used]
    if names:
        word = "hostPort" if len(ports) == 1 else "hostPorts"
        return f"hostPort ({_quoted(names)} uses {word} {', '.join(ports)})"
    return None


def _allow_privilege_escalation(spec: Obj) -> str | None:
    bad = [
        c["name"]
        for c in _containers(spec)
        if _context(c).get("allowPrivilegeEscalation") is not False
    ]
    if bad:
        return (
            f"allowPrivilegeEscalation != false ({_quoted(bad)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    return None


def _capabilities(spec: Obj) -> str | None:
    not_dropped, added = [], []
    for container in _containers(spec):
        capabilities = _context(container).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            not_dropped.append(container["name"])
        extra = [c for c in capabilities.get("add") or [] if c not in ALLOWED_ADDED_CAPABILITIES]
        if extra:
            added.append((container["name"], extra))
    parts = []
    if not_dropped:
        parts.append(f'{_quoted(not_dropped)} must set securityContext.capabilities.drop=["ALL"]')
    for name, extra in added:
        listed = ", ".join(f'"{capability}"' for capability in extra)
        parts.append(
            f"{_quoted([name])} must not include {listed} in securityContext.capabilities.add"
        )
    return f"unrestricted capabilities ({'; '.join(parts)})" if parts else None


def _run_as_non_root(spec: Obj) -> str | None:
    pod_says = (spec.get("securityContext") or {}).get("runAsNonRoot")
    explicit_false = [
        c["name"] for c in _containers(spec) if _context(c).get("runAsNonRoot") is False
    ]
    unset = [c["name"] for c in _containers(spec) if _context(c).get("runAsNonRoot") is None]
    parts = []
    if pod_says is False:
        parts.append("pod must not set securityContext.runAsNonRoot=false")
    if explicit_false:
        parts.append(f"{_quoted(explicit_false)} must not set securityContext.runAsNonRoot=false")
    if pod_says is not True and unset:
        parts.append(f"pod or {_quoted(unset)} must set securityContext.runAsNonRoot=true")
    return f"runAsNonRoot != true ({'; '.join(parts)})" if parts else None


def _run_as_user(spec: Obj) -> str | None:
    parts = []
    if (spec.get("securityContext") or {}).get("runAsUser") == 0:
        parts.append("pod must not set runAsUser=0")
    bad = [c["name"] for c in _containers(spec) if _context(c).get("runAsUser") == 0]
    if bad:
        parts.append(f"{_quoted(bad)} must not set runAsUser=0")
    return f"runAsUser=0 ({'; '.join(parts)})" if parts else None


def _seccomp_profile(spec: Obj) -> str | None:
    def allowed(context: Obj) -> bool | None:
        kind = (context.get("seccompProfile") or {}).get("type")
        return None if kind is None else kind in ("RuntimeDefault", "Localhost")

    pod_allowed = allowed(spec.get("securityContext") or {})
    bad, unset = [], []
    for container in _containers(spec):
        verdict = allowed(_context(container))
        if verdict is False:
            bad.append(container["name"])
        elif verdict is None and pod_allowed is not True:
            unset.append(container["name"])
    parts = []
    if pod_allowed is False:
        parts.append('pod must not set securityContext.seccompProfile.type to "Unconfined"')
    if bad:
        parts.append(
            f'{_quoted(bad)} must not set securityContext.seccompProfile.type to "Unconfined"'
        )
    if unset:
        parts.append(
            f"pod or {_quoted(unset)} must set securityContext.seccompProfile.type to "
            '"RuntimeDefault" or "Localhost"'
        )
    return f"seccompProfile ({'; '.join(parts)})" if parts else None


Check = Callable[[Obj], str | None]
BASELINE: tuple[Check, ...] = (_privileged, _host_namespaces, _host_path_volumes, _host_ports)
# Upstream's order of the restricted checks in a message.
RESTRICTED: tuple[Check, ...] = (
    _allow_privilege_escalation,
    _capabilities,
    _run_as_non_root,
    _run_as_user,
    _seccomp_profile,
)


def violations(level: str, spec: Obj) -> list[str]:
    checks = {"privileged": (), "baseline": BASELINE, "restricted": BASELINE + RESTRICTED}
    return [found for check in checks[level] if (found := check(spec))]


@dataclass(frozen=True)
class AuditEvent:
    """What a request's audit event carries from Pod Security: its object and annotations."""

    resource: str
    namespace: str
    name: str
    annotations: dict[str, str]


@dataclass
class AuditLog:
    events: deque[AuditEvent] = field(default_factory=lambda: deque(maxlen=KEPT_AUDIT_EVENTS))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, event: AuditEvent) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, namespace: str) -> list[AuditEvent]:
        with self.lock:
            return [event for event in self.events if event.namespace == namespace]


def policy(labels: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """Each mode's `level:version`; an invalid level counts as the strictest, as upstream's
    PolicyToEvaluate does."""
    found = {}
    for mode in MODES:
        level = labels.get(PREFIX + mode, defaults.get(mode, "privileged"))
        if level not in LEVELS:
            level = "restricted"
        found[mode] = f"{level}:{labels.get(f'{PREFIX}{mode}-version', 'latest')}"
    return found


def pod_spec_of(resource: str, obj: Obj) -> Obj | None:
    """The Pod spec a create of this kind runs through admission, or None for other kinds."""
    if resource == "pods":
        return obj.get("spec") or {}
    path = TEMPLATE_PATHS.get(resource)
    if path is None:
        return None
    found: Any = obj
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    return (found.get("spec") or {}) if isinstance(found, dict) else {}


def admit(
    namespace: Obj, resource: str, obj: Obj, defaults: dict[str, str], audit: AuditLog
) -> list[str]:
    """Pod Security for one create: the warnings to send back; 403 when a Pod violates its
    namespace's enforced level. Workloads are only warned about and audited, as upstream."""
    spec = pod_spec_of(resource, obj)
    if spec is None:
        return []
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    modes = policy(labels, defaults)
    name = (obj.get("metadata") or {}).get("name", "")
    annotations = {}
    if resource == "pods":
        annotations[ENFORCE_POLICY] = modes["enforce"]
    audit_found = violations(modes["audit"].split(":")[0], spec)
    if audit_found:
        annotations[AUDIT_VIOLATIONS] = _would_violate(modes["audit"], audit_found)
    audit.record(AuditEvent(resource, namespace["metadata"]["name"], name, annotations))
    if resource == "pods":
        enforced = violations(modes["enforce"].split(":")[0], spec)
        if enforced:
            message = f'pods "{name}" is forbidden: violates PodSecurity "{modes["enforce"]}": '
            raise errors.ApiError(
                403, "Forbidden", message + ", ".join(enforced), {"name": name, "kind": "pods"}
            )
    warned = violations(modes["warn"].split(":")[0], spec)
    return [_would_violate(modes["warn"], warned)] if warned else []


def _would_violate(level_version: str, found: list[str]) -> str:
    return f'would violate PodSecurity "{level_version}": ' + ", ".join(found)
