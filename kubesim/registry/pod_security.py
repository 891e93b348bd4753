"""Pod Security admission (k8s.io/pod-security-admission), for Pod creates: the namespace's
`pod-security.kubernetes.io/enforce` label (else the cluster's default, privileged unless the
topology says `pod_security: {enforce: ...}`) decides the level, and a Pod that violates it is
refused with the upstream message:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation
    != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ...

The checks are upstream's (policy/check_*.go) for what a Pod like the portal's can carry:
baseline's privileged, host namespaces, hostPath volumes and host ports; restricted's
allowPrivilegeEscalation, capabilities, runAsNonRoot, runAsUser and seccompProfile. Upstream's
other baseline checks (AppArmor, SELinux, /proc mount, sysctls, Windows host process) and the
restricted volume types are not modelled; nor are the warn and audit modes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.base import errors

LEVELS = ("privileged", "baseline", "restricted")
ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
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


def admit_pod(namespace: Obj, pod: Obj, default_level: str) -> None:
    """403 when the Pod violates its namespace's enforced level (pods/create only)."""
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    level = labels.get(ENFORCE, default_level)
    if level not in LEVELS:
        level = "restricted"  # upstream: an invalid level is enforced as the strictest
    found = violations(level, pod.get("spec") or {})
    if not found:
        return
    version = labels.get(ENFORCE_VERSION, "latest")
    name = pod["metadata"].get("name", "")
    message = f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": ' + ", ".join(
        found
    )
    raise errors.ApiError(403, "Forbidden", message, {"name": name, "kind": "pods"})
