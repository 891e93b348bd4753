"""Device counts per class, by evaluating the classes' CEL selectors as the scheduler does."""

from __future__ import annotations

from claims.kube.parsing import DeviceClassInfo, DeviceInfo
from claims.read import inventory

GPU_CLASS = DeviceClassInfo(
    "gpu.nvidia.com",
    ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"],
)
MIG_CLASS = DeviceClassInfo(
    "mig.nvidia.com",
    ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"],
)


def device(name: str, kind: str, **attributes: object) -> DeviceInfo:
    attrs = {"type": kind, "resource.kubernetes.io/pcieRoot": "pci0000:18", **attributes}
    return DeviceInfo("node-1", "gpu.nvidia.com", "node-1", name, attrs, {"memory": "80Gi"})


def test_it_counts_devices_per_class() -> None:
    devices = [device("gpu-0", "gpu"), device("gpu-1", "gpu"), device("gpu-1-mig-0", "mig")]
    built = inventory.build_inventory([GPU_CLASS, MIG_CLASS], devices)
    assert built["device_counts"] == {"gpu.nvidia.com": 2, "mig.nvidia.com": 1}


def test_it_reads_qualified_attributes_in_their_own_domain() -> None:
    row = inventory.device_for_cel(
        {
            "driver": "gpu.nvidia.com",
            "attributes": {"type": "gpu", "resource.kubernetes.io/pcieRoot": "pci0000:18"},
        }
    )
    assert row["attributes"]["gpu.nvidia.com"] == {"type": "gpu"}
    assert row["attributes"]["resource.kubernetes.io"] == {"pcieRoot": "pci0000:18"}


def test_it_treats_a_selector_error_as_no_match() -> None:
    broken = ["device.attributes['gpu.nvidia.com'].missing == 'x'"]
    assert not inventory.matches(broken, {"driver": "gpu.nvidia.com", "attributes": {}})


def test_a_remembered_answer_follows_the_device_when_it_changes() -> None:
    """Answers are remembered per device as the expression sees it: a device whose attributes
    change is asked again, and the same device in another dict gets the same answer."""
    small = ["device.attributes['gpu.nvidia.com'].productName == 'A100 40GB'"]
    row = {"driver": "gpu.nvidia.com", "attributes": {"productName": "H100"}}
    assert not inventory.matches(small, row)
    assert not inventory.matches(small, {**row, "name": "another-name"})
    row["attributes"] = {"productName": "A100 40GB"}
    assert inventory.matches(small, row)
    assert inventory.selector_holds(small[0], row) is True


def test_an_error_the_interpreter_returns_is_no_match() -> None:
    """celpy returns some evaluation errors instead of raising them; the scheduler's answer
    for an error is still "no match", never a match."""
    dividing = ["1 / 0 == 1"]
    row = {"driver": "gpu.nvidia.com", "attributes": {}}
    assert not inventory.matches(dividing, row)
    assert inventory.selector_holds(dividing[0], row) is None


def test_it_describes_allocated_devices_from_the_slices() -> None:
    built = inventory.build_inventory([GPU_CLASS], [device("gpu-0", "gpu", productName="H100")])
    allocated = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}
    ]
    [described] = inventory.describe_devices(built, allocated)
    assert described["attributes"]["productName"] == "H100"
    assert described["capacity"] == {"memory": "80Gi"}
    assert described["node"] == "node-1"
