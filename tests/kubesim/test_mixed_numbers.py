"""Selectors comparing an int attribute with a double or uint, scheduled over HTTPS.

Kubernetes' CEL compares numbers by value across int, uint and double (cross-type numeric
comparisons, heterogeneous equality), so the real scheduler allocates for `index == 1.0`;
`productName == 1` is false on every device (values of different kinds are unequal), so it
allocates nothing. The reference topology publishes `index` as driver v25.3 did (the real
cluster of ../shared/reference/apiserver-1.34 had it); newer drivers publish none.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

import kubesim
from kubesim.cluster import topology
from tests.fixtures.kubesim import create_namespace, wait_until
from tests.kubesim.test_scheduler import (
    cel,
    create_claim,
    create_pod,
    get_claim,
    get_pod,
    scheduled_condition,
)

REFERENCE = Path(topology.__file__).parent / "topologies" / "reference-1.34.yaml"
GPU = "device.attributes['gpu.nvidia.com']"
FIT_ERROR = (
    "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


@pytest.fixture
def reference() -> Iterator[kubesim.Handle]:
    """A cluster of each test's own: the reference has only two GPUs of index 1."""
    handle = kubesim.start(topology=str(REFERENCE), kubelet=False, speed=20)
    yield handle
    handle.stop()


def allocated(cluster: kubesim.Handle, namespace: str, name: str) -> list[str]:
    status = wait_until(lambda: get_claim(cluster, namespace, name).get("status"), timeout=15)
    results = status["allocation"]["devices"]["results"]
    return sorted(f"{r['pool']}/{r['device']}" for r in results)


@pytest.mark.parametrize(
    "selector", [f"{GPU}.index == 1.0", f"{GPU}.index > 0.5", f"{GPU}.index == 1u"]
)
def test_an_int_attribute_compared_with_a_double_or_uint_allocates(
    reference: kubesim.Handle, selector: str
) -> None:
    namespace = create_namespace(reference, "mixed")
    create_claim(reference, namespace, "second", selectors=cel(selector), count=1)
    create_pod(reference, namespace, "second", "second")

    (device,) = allocated(reference, namespace, "second")
    assert device.endswith("/gpu-1")


def test_a_string_attribute_equal_to_a_number_matches_no_device(
    reference: kubesim.Handle,
) -> None:
    namespace = create_namespace(reference, "mixed")
    create_claim(reference, namespace, "none", selectors=cel(f"{GPU}.productName == 1"))
    create_pod(reference, namespace, "none", "none")

    condition = wait_until(lambda: scheduled_condition(get_pod(reference, namespace, "none")))
    assert condition["message"] == FIT_ERROR
    assert get_claim(reference, namespace, "none").get("status", {}) == {}


def test_a_selector_that_fails_to_evaluate_stops_the_scheduling_cycle(
    reference: kubesim.Handle,
) -> None:
    """Ordering a string against a number is a runtime error ("no such overload"): the real
    allocator stops with "CEL runtime error" and the scheduler fails the Pod's cycle with
    reason SchedulerError, rather than trying the next device as a mismatch."""
    namespace = create_namespace(reference, "mixed")
    create_claim(reference, namespace, "broken", selectors=cel(f"{GPU}.productName > 1"))
    create_pod(reference, namespace, "broken", "broken")

    condition = wait_until(lambda: scheduled_condition(get_pod(reference, namespace, "broken")))
    assert condition["reason"] == "SchedulerError"
    assert condition["message"].startswith(
        f'running "DynamicResources" filter plugin: claim {namespace}/broken: selector #0: '
        "CEL runtime error: "
    )
    assert get_claim(reference, namespace, "broken").get("status", {}) == {}
