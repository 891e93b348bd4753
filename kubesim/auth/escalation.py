"""RBAC escalation prevention, as the rbac registry does it: a user may write a Role or
ClusterRole only with rules they hold themselves (or the `escalate` verb), and a binding only
to a role whose every rule they hold (or with the `bind` verb on that role)
(pkg/registry/rbac/validation/policy_comparator.go, rule.go ConfirmNoEscalation)."""

from __future__ import annotations

from typing import Any

from kubesim.auth.authentication import UserInfo
from kubesim.auth.rbac import GROUP, Attributes, Authorizer
from kubesim.base import errors

FULL_AUTHORITY = [
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
]


def breakdown(rule: dict) -> list[dict]:
    """One rule per group, resource, verb (and resource name); URLs per verb."""
    subrules = []
    verbs = rule.get("verbs") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in verbs:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                names = rule.get("resourceNames") or []
                subrules += [base | {"resourceNames": [n]} for n in names] if names else [base]
    for url in rule.get("nonResourceURLs") or []:
        subrules += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return subrules


def _has_all(owned: list[str], wanted: list[str]) -> bool:
    return set(wanted) <= set(owned)


def _resources_cover(owned: list[str], wanted: list[str]) -> bool:
    if "*" in owned or _has_all(owned, wanted):
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path or "*/" + path.split("/", 1)[1] not in owned:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: dict, sub: dict) -> bool:
    owned_verbs, owned_groups = owner.get("verbs") or [], owner.get("apiGroups") or []
    owned_names, sub_names = owner.get("resourceNames") or [], sub.get("resourceNames") or []
    urls = sub.get("nonResourceURLs") or []
    return (
        ("*" in owned_verbs or _has_all(owned_verbs, sub.get("verbs") or []))
        and ("*" in owned_groups or _has_all(owned_groups, sub.get("apiGroups") or []))
        and _resources_cover(owner.get("resources") or [], sub.get("resources") or [])
        and all(any(_url_covers(o, u) for o in owner.get("nonResourceURLs") or []) for u in urls)
        and (not owned_names or (bool(sub_names) and _has_all(owned_names, sub_names)))
    )


def uncovered(owner_rules: list[dict], rules: list[dict]) -> list[dict]:
    """Covers(): the broken-down rules no owner rule covers."""
    subrules = [sub for rule in rules for sub in breakdown(rule)]
    return [sub for sub in subrules if not any(rule_covers(o, sub) for o in owner_rules)]


def compact(rules: list[dict]) -> list[dict]:
    """CompactRules: simple rules on the same group, resource (and name) merge their verbs."""
    merged: dict[tuple, dict] = {}
    others = []
    for rule in rules:
        names = rule.get("resourceNames") or []
        if rule.get("nonResourceURLs") or len(names) > 1:
            others.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], tuple(names))
        if key in merged:
            verbs = merged[key]["verbs"]
            verbs += [v for v in rule["verbs"] if v not in verbs]
        else:
            merged[key] = {**rule, "verbs": list(rule["verbs"])}
    return others + list(merged.values())


def _go_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{value}"' for value in values) + "]"


def compact_string(rule: dict) -> str:
    fields = (
        ("APIGroups", "apiGroups"),
        ("Resources", "resources"),
        ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"),
        ("Verbs", "verbs"),
    )
    parts = [f"{label}:{_go_list(rule[key])}" for label, key in fields if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def confirm_no_escalation(
    authorizer: Authorizer, user: UserInfo, namespace: str, rules: list[dict]
) -> str:
    """The error text when `user` does not hold every rule, else ""."""
    owned, failures = authorizer.rules_for(user, namespace)
    missing = uncovered(owned, rules)
    if not missing:
        return ""
    described = sorted({compact_string(rule) for rule in compact(missing)})
    message = (
        f'user "{user.name}" (groups={_go_list(user.groups)}) is attempting to grant RBAC '
        "permissions not currently held:\n" + "\n".join(described)
    )
    if failures:
        message += f"; resolution errors: [{' '.join(failures)}]"
    return message


def _allowed(authorizer: Authorizer, user: UserInfo, verb: str, resource: str, **kw: str) -> bool:
    attrs = Attributes(user, verb, "", True, GROUP, resource=resource, **kw)
    return authorizer.authorize(attrs)[0]


def _role_problem(authorizer: Authorizer, user: UserInfo, target: Any, obj: dict) -> str:
    plural, namespace = target.kind.plural, target.namespace or ""
    if _allowed(authorizer, user, "escalate", plural, namespace=namespace, name=target.name or ""):
        return ""
    problem = confirm_no_escalation(authorizer, user, namespace, obj.get("rules") or [])
    if problem or plural != "clusterroles" or not obj.get("aggregationRule"):
        return problem
    # An aggregationRule can gather anything: it takes every right (the clusterrole registry).
    if confirm_no_escalation(authorizer, user, namespace, FULL_AUTHORITY):
        return "must have cluster-admin privileges to use the aggregationRule"
    return ""


def _binding_problem(authorizer: Authorizer, user: UserInfo, target: Any, obj: dict) -> str:
    namespace = target.namespace or ""
    ref = obj.get("roleRef") or {}
    kind = ref.get("kind")
    role_plural = "roles" if kind == "Role" else "clusterroles"
    name = ref.get("name") or ""
    if kind in ("Role", "ClusterRole") and _allowed(
        authorizer, user, "bind", role_plural, namespace=namespace, name=name
    ):
        return ""
    rules, failure = authorizer.role_rules(ref, namespace)
    return failure or confirm_no_escalation(authorizer, user, namespace, rules)


def check_write(authorizer: Authorizer, user: UserInfo, target: Any, obj: dict) -> None:
    """Refuse (403) a Role/ClusterRole or a binding the user may not write."""
    if user is None or user.privileged or target.kind.group != GROUP:
        return
    roles = target.kind.plural in ("roles", "clusterroles")
    problem = (_role_problem if roles else _binding_problem)(authorizer, user, target, obj)
    if problem:
        name = obj.get("metadata", {}).get("name") or ""
        raise errors.forbidden(GROUP, target.kind.plural, name, problem)
