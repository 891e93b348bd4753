"""The RBAC objects a real API server creates at start (upstream
plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, 1.34, user-facing roles and the
discovery roles), and the ClusterRole aggregation controller that fills admin, edit and view."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from kubesim.base import errors
from kubesim.registry.store import Store

GROUP = "rbac.authorization.k8s.io"
READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
READ_WRITE = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AUTHENTICATED, UNAUTHENTICATED = "system:authenticated", "system:unauthenticated"


def rule(verbs: tuple[str, ...], groups: tuple[str, ...], resources: tuple[str, ...]) -> dict:
    return {"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)}


def url_rule(verbs: tuple[str, ...], urls: tuple[str, ...]) -> dict:
    return {"verbs": list(verbs), "nonResourceURLs": list(urls)}


AGGREGATE_TO_VIEW = [
    rule(READ, ("",), ("pods", "replicationcontrollers", "replicationcontrollers/scale",
                       "serviceaccounts", "services", "services/status", "endpoints",
                       "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps")),
    rule(READ, ("",), ("limitranges", "resourcequotas", "bindings", "events", "pods/status",
                       "resourcequotas/status", "namespaces/status",
                       "replicationcontrollers/status", "pods/log")),
    rule(READ, ("",), ("namespaces",)),
    rule(READ, ("discovery.k8s.io",), ("endpointslices",)),
    rule(READ, ("apps",), ("controllerrevisions", "statefulsets", "statefulsets/scale",
                           "statefulsets/status", "daemonsets", "daemonsets/status",
                           "deployments", "deployments/scale", "deployments/status",
                           "replicasets", "replicasets/scale", "replicasets/status")),
    rule(READ, ("autoscaling",), ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
    rule(READ, ("batch",), ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
    rule(READ, ("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status")),
    rule(READ, ("networking.k8s.io",), ("ingresses", "ingresses/status", "networkpolicies")),
    # DRA (kubernetes/kubernetes#130738, 1.33+): read claims, their status and templates.
    rule(READ, ("resource.k8s.io",), ("resourceclaims", "resourceclaims/status",
                                      "resourceclaimtemplates")),
]  # fmt: skip

AGGREGATE_TO_EDIT = [
    rule(("impersonate",), ("",), ("serviceaccounts",)),
    rule(WRITE, ("",), ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
    rule(("create",), ("",), ("pods/eviction",)),
    rule(WRITE, ("",), ("replicationcontrollers", "replicationcontrollers/scale",
                        "serviceaccounts", "services", "services/proxy",
                        "persistentvolumeclaims", "configmaps", "secrets", "events")),
    rule(("create",), ("",), ("serviceaccounts/token",)),
    rule(WRITE, ("apps",), ("statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                            "deployments/scale", "deployments/rollback", "replicasets",
                            "replicasets/scale")),
    rule(WRITE, ("autoscaling",), ("horizontalpodautoscalers",)),
    rule(WRITE, ("batch",), ("jobs", "cronjobs")),
    rule(WRITE, ("policy",), ("poddisruptionbudgets",)),
    rule(WRITE, ("networking.k8s.io",), ("ingresses", "networkpolicies")),
    rule(READ_WRITE, ("coordination.k8s.io",), ("leases",)),
    # DRA (kubernetes/kubernetes#130738, 1.33+): write claims and templates.
    rule(WRITE, ("resource.k8s.io",), ("resourceclaims", "resourceclaimtemplates")),
    rule(READ, ("",), ("secrets", "pods/attach", "pods/proxy", "pods/exec",
                       "pods/portforward", "services/proxy")),
]  # fmt: skip

AGGREGATE_TO_ADMIN = [
    rule(("create",), ("authorization.k8s.io",), ("localsubjectaccessreviews",)),
    rule(READ_WRITE, (GROUP,), ("rolebindings", "roles")),
]

DISCOVERY_URLS = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                  "/openapi/*", "/readyz", "/version", "/version/")  # fmt: skip
PUBLIC_INFO_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")


def _aggregated(name: str, to: str | None, selects: str) -> dict:
    role = _cluster_role(name, [], to)
    role["aggregationRule"] = {
        "clusterRoleSelectors": [{"matchLabels": {AGGREGATE + selects: "true"}}]
    }
    return role


def _cluster_role(name: str, rules: list[dict], to: str | None = None) -> dict:
    labels = dict(BOOTSTRAP_LABEL) | ({AGGREGATE + to: "true"} if to else {})
    metadata = {"name": name, "labels": labels, "annotations": dict(AUTOUPDATE)}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": metadata,
        "rules": rules,
    }


def cluster_roles() -> list[dict]:
    everything = [rule(("*",), ("*",), ("*",)), url_rule(("*",), ("*",))]
    review = ("authorization.k8s.io",)
    basic = [
        rule(("create",), review, ("selfsubjectaccessreviews", "selfsubjectrulesreviews")),
        rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
    ]
    return [
        _aggregated("admin", None, "admin"),
        _cluster_role("cluster-admin", everything),
        _aggregated("edit", "admin", "edit"),
        _cluster_role("system:aggregate-to-admin", AGGREGATE_TO_ADMIN, "admin"),
        _cluster_role("system:aggregate-to-edit", AGGREGATE_TO_EDIT, "edit"),
        _cluster_role("system:aggregate-to-view", AGGREGATE_TO_VIEW, "view"),
        _cluster_role("system:basic-user", basic),
        _cluster_role("system:discovery", [url_rule(("get",), DISCOVERY_URLS)]),
        _cluster_role("system:public-info-viewer", [url_rule(("get",), PUBLIC_INFO_URLS)]),
        _aggregated("view", "edit", "view"),
    ]


def _binding(role: str, *groups: str) -> dict:
    subjects = [{"apiGroup": GROUP, "kind": "Group", "name": group} for group in groups]
    metadata = {"name": role, "labels": dict(BOOTSTRAP_LABEL), "annotations": dict(AUTOUPDATE)}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    }


def cluster_role_bindings() -> list[dict]:
    return [
        _binding("cluster-admin", "system:masters"),
        _binding("system:basic-user", AUTHENTICATED),
        _binding("system:discovery", AUTHENTICATED),
        _binding("system:public-info-viewer", AUTHENTICATED, UNAUTHENTICATED),
    ]


def seed_policy(store: Store, kinds: dict[tuple[str, str], Any]) -> None:
    """Create the bootstrap roles and bindings that are missing (a --state file may hold them)."""
    for plural, objs in (
        ("clusterroles", cluster_roles()),
        ("clusterrolebindings", cluster_role_bindings()),
    ):
        kind = kinds[(GROUP, plural)]
        for obj in objs:
            if not store.exists(kind, None, obj["metadata"]["name"]):
                store.create(kind, obj)
    aggregate_all(store, kinds[(GROUP, "clusterroles")])


def _selected(role: dict, selectors: list[dict]) -> bool:
    labels = role["metadata"].get("labels") or {}
    for selector in selectors:
        wanted = (selector or {}).get("matchLabels") or {}
        if wanted and all(labels.get(key) == value for key, value in wanted.items()):
            return True
    return False


def aggregated_rules(role: dict, roles: list[dict]) -> list[dict]:
    """The rules of every ClusterRole the aggregation rule selects, in name order, deduplicated
    (the clusterrole-aggregation controller)."""
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    rules: list[dict] = []
    for other in sorted(roles, key=lambda r: r["metadata"]["name"]):
        if other["metadata"]["name"] != role["metadata"]["name"] and _selected(other, selectors):
            rules += [r for r in other.get("rules") or [] if r not in rules]
    return rules


def aggregate_all(store: Store, kind: Any) -> None:
    """Recompute aggregated ClusterRoles until nothing changes (edit feeds admin)."""
    for _ in range(5):
        changed = False
        roles, _ = store.list(kind)
        for role in roles:
            if not role.get("aggregationRule"):
                continue
            rules = aggregated_rules(role, roles)
            if rules != (role.get("rules") or []):
                role["rules"] = rules
                with contextlib.suppress(errors.ApiError):
                    store.update(kind, role, check_rv=False)
                changed = True
        if not changed:
            return


class Aggregator:
    """Keeps admin, edit and view (and any ClusterRole with an aggregationRule) up to date."""

    def __init__(self, store: Store, kinds: dict[tuple[str, str], Any]) -> None:
        self.store = store
        self.kind = kinds[(GROUP, "clusterroles")]
        self._lock = threading.Lock()
        self._local = threading.local()  # our own updates must not recurse
        store.subscribe(self._on_event)

    def _on_event(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind is not self.kind or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            with self._lock:
                aggregate_all(self.store, self.kind)
        finally:
            self._local.busy = False
