"""The scheduler's NodeAffinity filter (k8s.io/component-helpers/scheduling/corev1/nodeaffinity):
a Pod fits a node when every `spec.nodeSelector` label matches and, if the Pod has a required
node affinity, at least one of its nodeSelectorTerms does. Within a term every matchExpression
(on labels) and every matchField (`metadata.name` only) must hold; a term without either
matches no node."""

from __future__ import annotations

from typing import Any


def pod_fits_node(pod: dict[str, Any], node: str, labels: dict[str, str]) -> bool:
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_term_matches(term, node, labels) for term in terms)


def _term_matches(term: dict[str, Any], node: str, labels: dict[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    name_field = {"metadata.name": node}
    return all(_holds(e, labels) for e in expressions) and all(
        _holds(f, name_field) for f in fields
    )


def _holds(requirement: dict[str, Any], values: dict[str, str]) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator", "")
    wanted = requirement.get("values") or []
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, limit = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False
