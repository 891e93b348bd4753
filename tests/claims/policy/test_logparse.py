from pathlib import Path

import pytest

from claims.policy.logparse import QueriedDevice, parse_device_query, parse_vector_add

FIXTURES = Path(__file__).parents[2] / "fixtures"
REAL_OUTPUT = FIXTURES / "real-gpu-output"

# The shape kubesim prints for an A100 (reference dra.md §5.2, the cuda12.5.0 image).
KUBESIM_A100 = (FIXTURES / "cuda-output" / "deviceQuery-A100-kubesim.txt").read_text()

TWO_DEVICES = """\
Detected 2 CUDA Capable device(s)

Device 0: "NVIDIA H100 80GB HBM3"
  CUDA Driver Version / Runtime Version          13.0 / 12.5
  CUDA Capability Major/Minor version number:    9.0
  Total amount of global memory:                 81080 MBytes (85017624576 bytes)

Device 1: "NVIDIA A100-SXM4-80GB"
  CUDA Driver Version / Runtime Version          13.0 / 12.5
  CUDA Capability Major/Minor version number:    8.0
  Total amount of global memory:                 81158 MBytes (85100068864 bytes)
> Peer access from NVIDIA H100 80GB HBM3 (GPU0) -> NVIDIA A100-SXM4-80GB (GPU1) : No

deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = 13.0, NumDevs = 2
Result = PASS
"""


def test_it_reads_the_real_h200_vector_add_as_passed() -> None:
    text = (REAL_OUTPUT / "vectorAdd-H200.txt").read_text()

    assert parse_vector_add(text).passed is True


def test_it_reads_the_real_h200_device_query() -> None:
    text = (REAL_OUTPUT / "deviceQuery-H200.txt").read_text()

    result = parse_device_query(text)

    assert result.passed is True
    assert result.devices == [
        QueriedDevice(
            index=0,
            name="NVIDIA H200",
            compute_capability="9.0",
            memory_mib=143156,
            driver_version="13.0",
            runtime_version="13.0",
        )
    ]


def test_it_reads_the_kubesim_shaped_a100_output() -> None:
    result = parse_device_query(KUBESIM_A100)

    assert result.passed is True
    [device] = result.devices
    assert device.name == "NVIDIA A100-SXM4-80GB"
    assert device.compute_capability == "8.0"
    assert device.memory_mib == 81158
    assert (device.driver_version, device.runtime_version) == ("13.0", "12.5")


def test_it_reads_every_device_of_a_multi_gpu_query() -> None:
    result = parse_device_query(TWO_DEVICES)

    assert [(d.index, d.name, d.compute_capability) for d in result.devices] == [
        (0, "NVIDIA H100 80GB HBM3", "9.0"),
        (1, "NVIDIA A100-SXM4-80GB", "8.0"),
    ]
    assert [d.memory_mib for d in result.devices] == [81080, 81158]


def test_it_reports_a_device_query_failure() -> None:
    text = "cudaGetDeviceCount returned 802\n-> system not yet initialized\nResult = FAIL\n"

    result = parse_device_query(text)

    assert result.passed is False
    assert result.devices == []


@pytest.mark.parametrize(
    "failure",
    [
        "Result verification failed at element 1234!",
        "Failed to allocate device vector A (error code out of memory)!",
        "Failed to launch vectorAdd kernel (error code no kernel image is available)!",
    ],
)
def test_it_reports_a_vector_add_failure_from_stderr(failure: str) -> None:
    text = f"[Vector addition of 50000 elements]\n{failure}\n"

    result = parse_vector_add(text)

    assert result.passed is False
    assert result.failure == failure


def test_it_has_no_verdict_while_vector_add_is_still_running() -> None:
    text = "[Vector addition of 50000 elements]\nCopy input data from the host memory"

    assert parse_vector_add(text).passed is None


def test_it_keeps_what_a_truncated_device_query_printed() -> None:
    cut = KUBESIM_A100[: KUBESIM_A100.index("  Total amount of global memory")]

    result = parse_device_query(cut)

    assert result.passed is None
    [device] = result.devices
    assert device.name == "NVIDIA A100-SXM4-80GB"
    assert device.compute_capability == "8.0"
    assert device.memory_mib is None


@pytest.mark.parametrize(
    "garbage",
    ["", "\x00\xff\ufffd", 'Device 0: "', 'Device x: "GPU"\nResult = MAYBE', "Test PASSE"],
)
def test_it_never_raises_on_garbled_logs(garbage: str) -> None:
    assert parse_vector_add(garbage).passed is None
    result = parse_device_query(garbage)
    assert result.passed is None
    assert result.devices == []
