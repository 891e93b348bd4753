"""The RBAC authorizer: request attributes as upstream's RequestInfoFactory reads them, rules
from (Cluster)RoleBindings, and the 403 the API server answers (responsewriters/errors.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.auth.audit import DecisionLog
from kubesim.auth.authentication import UserInfo, split_service_account
from kubesim.base import errors
from kubesim.registry.store import Store

GROUP = "rbac.authorization.k8s.io"
# requestinfo.go: verbs in the path (/api/v1/watch/...), subresources of a namespace itself.
SPECIAL_VERBS = ("proxy", "watch")
NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass
class Attributes:
    user: UserInfo
    verb: str
    path: str = ""
    resource_request: bool = False
    api_group: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def _name_from_field_selector(selector: str) -> str:
    for term in selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and key.strip() == "metadata.name" and not key.endswith("!"):
            value = value.strip()
            return value if value not in ("", ".", "..") and "/" not in value else ""
    return ""


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true", "t")


def request_attributes(user: UserInfo, method: str, path: str, query: dict[str, str]) -> Attributes:
    """What RBAC decides on, read from the URL alone (RequestInfoFactory.NewRequestInfo)."""
    attrs = Attributes(user, method.lower(), path)
    parts = [part for part in path.split("/") if part]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return attrs
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return attrs
        attrs.api_group, rest = rest[0], rest[1:]
    attrs.resource_request = True
    rest = rest[1:]  # the version
    attrs.verb = _method_verb(method)
    if rest[0] in SPECIAL_VERBS and len(rest) > 1:
        attrs.verb, rest = rest[0], rest[1:]
    if rest[0] == "namespaces" and len(rest) > 1:
        attrs.namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    _fill_resource(attrs, rest, query)
    return attrs


def _method_verb(method: str) -> str:
    verbs = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch"}
    return verbs.get(method, "delete" if method == "DELETE" else "")


def _fill_resource(attrs: Attributes, rest: list[str], query: dict[str, str]) -> None:
    attrs.resource = rest[0]
    attrs.name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2 and attrs.verb != "proxy":
        attrs.subresource = rest[2]
    if not attrs.name and attrs.verb == "get":
        attrs.verb = "watch" if _flag(query, "watch") else "list"
        attrs.name = _name_from_field_selector(query.get("fieldSelector", ""))
    if not attrs.name and attrs.verb == "delete":
        attrs.verb = "deletecollection"


# -- matching (rbac.go RuleAllows and rbacv1helpers) ------------------------------------------


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def _resource_matches(rule: dict, combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _url_matches(rule: dict, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url.rstrip("*"))):
            return True
    return False


def rule_allows(attrs: Attributes, rule: dict) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    names = rule.get("resourceNames") or []
    return (
        _has(rule.get("apiGroups"), attrs.api_group)
        and _resource_matches(rule, combined, attrs.subresource)
        and (not names or attrs.name in names)
    )


def applies_to(user: UserInfo, subject: dict, namespace: str) -> bool:
    """appliesToUser: does the binding's subject name this user?"""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and split_service_account(user.name) == (sa_namespace, name)
    return False


def describe_subject(subject: dict, namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass
class Visit:
    """The rules a user holds by one binding, or the error resolving its role."""

    source: str
    rules: list[dict] = field(default_factory=list)
    error: str = ""


class Authorizer:
    def __init__(self, store: Store, kinds: dict[tuple[str, str], Any]) -> None:
        self.store = store
        self.kinds = {plural: kinds[(GROUP, plural)] for plural in _PLURALS}
        self.decisions = DecisionLog()

    def role_rules(self, ref: dict, namespace: str) -> tuple[list[dict], str]:
        kind = ref.get("kind")
        plural = "roles" if kind == "Role" else "clusterroles"
        try:
            role = self.store.get(
                self.kinds[plural], namespace if kind == "Role" else None, ref.get("name") or "",
                copy=False,
            )  # fmt: skip
        except errors.ApiError:
            return [], f'{plural[:-1]}.{GROUP} "{ref.get("name")}" not found'
        return list(role.get("rules") or []), ""

    def visits(self, user: UserInfo, namespace: str) -> Iterator[Visit]:
        """Cluster-wide bindings first, then the RoleBindings of `namespace`."""
        bindings, _ = self.store.list(self.kinds["clusterrolebindings"], copy=False)
        for binding in bindings:
            yield from self._binding_visits(user, binding, "")
        if namespace:
            bindings, _ = self.store.list(self.kinds["rolebindings"], namespace, copy=False)
            for binding in bindings:
                yield from self._binding_visits(user, binding, namespace)

    def _binding_visits(self, user: UserInfo, binding: dict, namespace: str) -> Iterator[Visit]:
        for subject in binding.get("subjects") or []:
            if isinstance(subject, dict) and applies_to(user, subject, namespace):
                ref = binding.get("roleRef") or {}
                rules, error = self.role_rules(ref, namespace)
                yield Visit(_describe(binding, namespace, subject), rules, error)
                return

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) as the RBAC authorizer answers; system:masters always may."""
        allowed, reason = self.decide(attrs)
        if not attrs.user.privileged:
            self.decisions.record(attrs, allowed, reason)
        return allowed, reason

    def decide(self, attrs: Attributes) -> tuple[bool, str]:
        """The decision alone, recorded nowhere (a SubjectAccessReview asks about one)."""
        if attrs.user.privileged:
            return True, ""
        failures = []
        for visit in self.visits(attrs.user, attrs.namespace):
            if any(rule_allows(attrs, rule) for rule in visit.rules):
                return True, f"RBAC: allowed by {visit.source}"
            if visit.error:
                failures.append(visit.error)
        if not failures:
            return False, ""
        listed = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        return False, f"RBAC: {listed}"

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[dict], list[str]]:
        rules: list[dict] = []
        failures: list[str] = []
        for visit in self.visits(user, namespace):
            rules += visit.rules
            failures += [visit.error] if visit.error else []
        return rules, failures

    def require(self, attrs: Attributes) -> None:
        allowed, reason = self.authorize(attrs)
        if not allowed:
            raise forbidden(attrs, reason)

    def check(self) -> Callable[[UserInfo, str, str, str, str], None]:
        """`impersonate` checks for auth.impersonate."""

        def allowed(user: UserInfo, resource: str, namespace: str, name: str, group: str) -> None:
            attrs = Attributes(user, "impersonate", "", True, group, namespace, resource, "", name)
            self.require(attrs)

        return allowed


_PLURALS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")


def _describe(binding: dict, namespace: str, subject: dict) -> str:
    meta, ref = binding["metadata"], binding.get("roleRef") or {}
    who = describe_subject(subject, namespace)
    if namespace:
        name = f"{meta['name']}/{namespace}"
        return f'RoleBinding "{name}" of {ref.get("kind")} "{ref.get("name")}" to {who}'
    return f'ClusterRoleBinding "{meta["name"]}" of ClusterRole "{ref.get("name")}" to {who}'


def forbidden_message(attrs: Attributes) -> str:
    user = attrs.user.name
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    head = (
        f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}"'
    )
    if attrs.namespace:
        return f'{head} in the namespace "{attrs.namespace}"'
    return f"{head} at the cluster scope"


def forbidden(attrs: Attributes, reason: str = "") -> errors.ApiError:
    """ForbiddenStatusError: the 403 for a request RBAC refused."""
    message = forbidden_message(attrs) + (f": {reason}" if reason else "")
    return errors.forbidden(attrs.api_group, attrs.resource, attrs.name, message)
