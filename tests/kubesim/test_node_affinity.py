"""The NodeAffinity filter: nodeSelector, then the required terms (any term, all of its parts)."""

from __future__ import annotations

import pytest

from kubesim.controllers.node_affinity import pod_fits_node

LABELS = {"gpu": "h100", "memory-gi": "80"}


def pod_with(*terms: dict, selector: dict | None = None) -> dict:
    spec: dict = {"nodeSelector": selector} if selector else {}
    if terms:
        required = {"nodeSelectorTerms": list(terms)}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    return {"spec": spec}


def expression(key: str, operator: str, *values: str) -> dict:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        (pod_with(), True),
        (pod_with(selector={"gpu": "h100"}), True),
        (pod_with(selector={"gpu": "a100"}), False),
        (pod_with(expression("gpu", "In", "a100", "h100")), True),
        (pod_with(expression("gpu", "NotIn", "h100")), False),
        (pod_with(expression("zone", "NotIn", "x")), True),
        (pod_with(expression("gpu", "Exists")), True),
        (pod_with(expression("gpu", "DoesNotExist")), False),
        (pod_with(expression("memory-gi", "Gt", "64")), True),
        (pod_with(expression("memory-gi", "Lt", "64")), False),
        (pod_with(expression("gpu", "Gt", "1")), False),
        (pod_with({}), False),
        (pod_with(expression("gpu", "In", "a100"), expression("gpu", "Exists")), True),
        (
            pod_with(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ),
            True,
        ),
        (
            pod_with(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
            ),
            False,
        ),
    ],
)
def test_it_filters_nodes_as_the_scheduler_does(pod: dict, fits: bool) -> None:
    assert pod_fits_node(pod, "n1", LABELS) is fits
