"""The permissions the portal needs in a cluster (deploy/base/clusterrole.yaml, which
tests/claims/worker/test_least_privilege.py holds to what the portal uses), and which of them
an identity lacks, asked of the cluster one SelfSubjectAccessReview each: the precise way
(a SelfSubjectRulesReview answers for one namespace only, and may be incomplete).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str  # with its subresource: "pods/log"
    name: str = ""  # a resourceName the rule is limited to

    def __str__(self) -> str:
        """As an admin writes it in a Role: "list resourceslices.resource.k8s.io"."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {resource}" + (f" {self.name}" if self.name else "")

    def review_attributes(self) -> dict[str, str]:
        """spec.resourceAttributes of its SelfSubjectAccessReview (every namespace: the
        portal's rules are a ClusterRole's)."""
        resource, _, subresource = self.resource.partition("/")
        attributes = {"verb": self.verb, "group": self.group, "resource": resource}
        if subresource:
            attributes["subresource"] = subresource
        if self.name:
            attributes["name"] = self.name
        return attributes


def _rule(group: str, resources: tuple[str, ...], verbs: tuple[str, ...]) -> list[Permission]:
    return [Permission(verb, group, resource) for resource in resources for verb in verbs]


ALL = ("get", "list", "watch", "create", "patch", "delete")
WORKLOAD = ("get", "list", "create", "patch", "delete")  # a workload's objects: no watch
RBAC = "rbac.authorization.k8s.io"
KUEUE = "kueue.x-k8s.io"
KUEUE_CONFIG = "kueue-manager-config"  # Kueue's Configuration (claims/kube/kueue.py)

# deploy/base/clusterrole.yaml, rule by rule (a test compares the two).
NEEDED_WITHOUT_BIND: tuple[Permission, ...] = (
    *_rule("", ("namespaces", "pods", "resourcequotas"), ALL),
    # Workloads: a batch Job (watched by the cluster loop), a notebook's Service and Ingress.
    *_rule("batch", ("jobs",), ALL),
    *_rule("", ("services",), WORKLOAD),
    *_rule("networking.k8s.io", ("ingresses",), WORKLOAD),
    *_rule("", ("pods/log",), ("get",)),
    *_rule("", ("events",), ("list",)),
    *_rule("", ("serviceaccounts",), ("get", "list", "watch", "create", "patch")),
    *_rule("", ("serviceaccounts/token",), ("create",)),
    *_rule("", ("nodes",), ("list",)),
    *_rule("resource.k8s.io", ("resourceclaims",), ALL),
    *_rule("resource.k8s.io", ("deviceclasses", "resourceslices"), ("list", "watch")),
    *_rule("resource.k8s.io", ("devicetaintrules",), ("list", "watch")),
    *_rule(RBAC, ("rolebindings",), ("get", "list", "watch", "create", "patch")),
    # Kueue, where the cluster runs it: its Workloads followed, its queues and Configuration
    # read by preflight, the positions of pending Jobs read from its visibility API.
    *_rule(KUEUE, ("workloads",), ("list", "watch")),
    *_rule(KUEUE, ("clusterqueues", "localqueues"), ("list",)),
    *_rule(f"visibility.{KUEUE}", ("localqueues/pendingworkloads",), ("get",)),
    Permission("get", "", "configmaps", KUEUE_CONFIG),
)  # fmt: skip


def needed(access_role: str = "edit") -> tuple[Permission, ...]:
    """Every permission the portal needs; it binds users to `access_role` (the setting
    ACCESS_CLUSTER_ROLE) without holding all of that role."""
    return (*NEEDED_WITHOUT_BIND, Permission("bind", RBAC, "clusterroles", access_role))


def missing_words(missing: list[Permission]) -> str:
    return ", ".join(str(permission) for permission in missing)
