"""Choosing devices for claims on one node, as the scheduler's structured allocator does."""

from pathlib import Path

import pytest

from kubesim.cluster import topology
from kubesim.controllers.allocator import ClassMissing, allocate, candidates

DEFAULT = topology.load()
SLICES = [topology.slice_object(DEFAULT, node, "uid") for node in DEFAULT.node_names]
CLASSES = {c["metadata"]["name"]: c for c in topology.device_class_objects(DEFAULT)}
H100_NODE = candidates(SLICES, "gpu-node-1")
A100_NODE = candidates(SLICES, "gpu-node-2")


def claim(*requests: dict, constraints: list | None = None) -> dict:
    devices: dict = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "c", "namespace": "n"}, "spec": {"devices": devices}}


def request(
    name: str = "gpu", count: int = 1, mode: str = "ExactCount", selectors: list | None = None
) -> dict:
    exact = {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": mode,
        "selectors": selectors or [],
    }
    if mode == "ExactCount":
        exact["count"] = count
    return {"name": name, "exactly": exact}


def cel(expression: str) -> list[dict]:
    return [{"cel": {"expression": expression}}]


def devices(results: list[dict] | None) -> list[str]:
    return [r["device"] for r in results or []]


def test_it_lists_the_devices_a_node_publishes() -> None:
    assert [c.name for c in H100_NODE] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert {c.pool for c in A100_NODE} == {"gpu-node-2"}


def test_it_allocates_one_gpu_with_the_full_result() -> None:
    results = allocate(claim(request()), CLASSES, H100_NODE, set())
    assert results == [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0"}
    ]


def test_it_never_hands_out_a_device_in_use() -> None:
    in_use = {("gpu.nvidia.com", "gpu-node-1", "gpu-0"), ("gpu.nvidia.com", "gpu-node-1", "gpu-1")}
    assert devices(allocate(claim(request(count=2)), CLASSES, H100_NODE, in_use)) == [
        "gpu-2",
        "gpu-3",
    ]
    assert allocate(claim(request(count=3)), CLASSES, H100_NODE, in_use) is None


def test_it_gives_distinct_devices_to_two_requests() -> None:
    results = allocate(claim(request("a"), request("b", count=2)), CLASSES, A100_NODE, set())
    assert [(r["request"], r["device"]) for r in results] == [
        ("a", "gpu-0"),
        ("b", "gpu-1"),
        ("b", "gpu-2"),
    ]


def test_it_takes_all_matching_devices_in_all_mode() -> None:
    assert devices(allocate(claim(request(mode="All")), CLASSES, H100_NODE, set())) == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
        "gpu-3",
    ]
    busy = {("gpu.nvidia.com", "gpu-node-1", "gpu-3")}
    assert allocate(claim(request(mode="All")), CLASSES, H100_NODE, busy) is None


def test_it_applies_request_selectors() -> None:
    h100_only = request(
        selectors=cel("device.attributes['gpu.nvidia.com'].productName.contains('H100')")
    )
    assert allocate(claim(h100_only), CLASSES, A100_NODE, set()) is None
    assert devices(allocate(claim(h100_only), CLASSES, H100_NODE, set())) == ["gpu-0"]
    big = request(
        selectors=cel("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")
    )
    assert allocate(claim(big), CLASSES, A100_NODE, set()) is None
    # NVML reports 81559 MiB for an H100 80GB HBM3, less than 80Gi: as on a real cluster.
    assert allocate(claim(big), CLASSES, H100_NODE, set()) is None


def test_it_applies_the_device_class_selectors() -> None:
    mig_only = {
        "mig.nvidia.com": {
            "spec": {"selectors": cel("device.attributes['gpu.nvidia.com'].type == 'mig'")}
        }
    }
    mig_request = {
        "name": "m",
        "exactly": {
            "deviceClassName": "mig.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 1,
        },
    }
    assert allocate(claim(mig_request), mig_only, H100_NODE, set()) is None


def test_it_refuses_a_missing_device_class() -> None:
    missing = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}
    with pytest.raises(
        ClassMissing, match=r"request gpu: device class gpu\.example\.com does not exist"
    ):
        allocate(claim(missing), CLASSES, H100_NODE, set())


def test_it_tries_first_available_subrequests_in_order() -> None:
    prioritized = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "four",
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 4,
            },
            {
                "name": "one",
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
            },
        ],
    }
    assert {r["request"] for r in allocate(claim(prioritized), CLASSES, H100_NODE, set())} == {
        "gpu/four"
    }
    busy = {("gpu.nvidia.com", "gpu-node-1", "gpu-0")}
    assert [r["request"] for r in allocate(claim(prioritized), CLASSES, H100_NODE, busy)] == [
        "gpu/one"
    ]


def test_it_keeps_match_attribute_constraints() -> None:
    mig = topology.load(Path(topology.__file__).parent / "topologies" / "mig-example.yaml")
    mig_devices = candidates([topology.slice_object(mig, "mig-node-1", "u")], "mig-node-1")
    classes = {c["metadata"]["name"]: c for c in topology.device_class_objects(mig)}
    two = {
        "name": "m",
        "exactly": {
            "deviceClassName": "mig.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
        },
    }
    same_parent = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
    results = allocate(claim(two, constraints=same_parent), classes, mig_devices, set())
    assert devices(results) == ["gpu-0-mig-19-0-1", "gpu-0-mig-19-1-1"]
    mixed = [request("g"), {"name": "m", "exactly": {**two["exactly"], "count": 1}}]
    constraint = [{"matchAttribute": "gpu.nvidia.com/parentUUID", "requests": ["g", "m"]}]
    assert allocate(claim(*mixed, constraints=constraint), classes, mig_devices, set()) is None
    same_product = [{"matchAttribute": "gpu.nvidia.com/productName"}]
    assert len(allocate(claim(*mixed, constraints=same_product), classes, mig_devices, set())) == 2
