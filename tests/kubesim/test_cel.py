"""DRA device selectors evaluated for real with cel-python against published devices."""

import pytest

from kubesim.base.cel_env import (
    compile_error,
    device_activation,
    expand_bind,
    matches,
    parse_quantity,
)
from kubesim.cluster import topology

DEFAULT = topology.load()
H100 = device_activation(
    "gpu.nvidia.com", DEFAULT.devices_by_node["gpu-node-1"][0].as_slice_device()
)
A100 = device_activation(
    "gpu.nvidia.com", DEFAULT.devices_by_node["gpu-node-2"][0].as_slice_device()
)


@pytest.mark.parametrize(
    ("expression", "on_h100", "on_a100"),
    [
        (
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'gpu'",
            True,
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", True, False),
        (
            "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')",
            False,
            True,
        ),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True, True),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('41Gi')) >= 0", True, False),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('64Gi'))", True, False),
        (
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
            ".compareTo(semver('9.0.0')) >= 0",
            True,
            False,
        ),
        (
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isLessThan(semver('8.6.0'))",
            False,
            True,
        ),
        (
            "device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Blackwell']",
            True,
            False,
        ),
        ("device.attributes['resource.kubernetes.io'].pcieRoot.startsWith('pci0000:')", True, True),
        (
            "cel.bind(gpu, device.attributes['gpu.nvidia.com'], "
            "gpu.type == 'gpu' && gpu.brand == 'Nvidia')",
            True,
            True,
        ),
        ("device.attributes['example.com'].size() == 0", True, True),
    ],
)
def test_it_evaluates_selectors_on_devices(expression: str, on_h100: bool, on_a100: bool) -> None:
    assert compile_error(expression) is None
    assert matches(expression, H100) is on_h100
    assert matches(expression, A100) is on_a100


def test_it_treats_an_evaluation_error_as_no_match() -> None:
    assert matches("device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'", H100) is False
    assert (
        matches("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('lots')) > 0", H100)
        is False
    )


def test_it_reports_syntax_errors_with_a_position() -> None:
    detail = compile_error("device.driver == && true")
    assert detail is not None
    assert detail.startswith("compilation failed: ERROR: <input>:1:18: Syntax error:")
    assert detail.endswith(" | device.driver == && true\n | .................^")


def test_it_expands_cel_bind_without_touching_strings_or_fields() -> None:
    expanded = expand_bind("cel.bind(x, device.driver, x == 'x' && device.x == x)")
    assert expanded == "((device.driver) == 'x' && device.x == (device.driver))"


@pytest.mark.parametrize(
    ("text", "value"),
    [("80Gi", 80 * 2**30), ("40960Mi", 40 * 2**30), ("1500m", 1.5), ("2k", 2000), ("1e3", 1000)],
)
def test_it_parses_quantities(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)
