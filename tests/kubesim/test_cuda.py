"""What the CUDA sample images print on the allocated GPUs."""

import re
from pathlib import Path

from kubesim.base.cel_env import parse_quantity
from kubesim.cluster import topology
from kubesim.kubelet import cuda

REAL_OUTPUT = Path(__file__).parents[1] / "fixtures" / "real-gpu-output"
REFERENCE = REAL_OUTPUT / "deviceQuery-H200.txt"
DEFAULT = topology.load()
H100 = DEFAULT.devices_by_node["gpu-node-1"]
A100 = DEFAULT.devices_by_node["gpu-node-2"]


def labels(lines: list[str]) -> list[str]:
    """The fixed part of each deviceQuery line (the label up to its value column)."""
    return [re.sub(r"\d+", "N", re.sub(r'"[^"]*"', '""', line)[:48]) for line in lines]


def test_it_prints_vector_add_exactly() -> None:
    run = cuda.run_image("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", H100[:1])
    assert run.exit_code == 0
    assert run.lines == (REAL_OUTPUT / "vectorAdd-H200.txt").read_text().splitlines()


def test_it_fails_vector_add_without_a_gpu() -> None:
    run = cuda.vector_add([])
    assert run.exit_code == 1
    assert run.lines[-1].startswith("Failed to allocate device vector A")


def test_it_names_the_allocated_gpu_in_device_query() -> None:
    run = cuda.run_image("nvcr.io/nvidia/k8s/cuda-sample:devicequery", A100[:1])
    text = "\n".join(run.lines)
    assert run.exit_code == 0
    assert run.lines[0] == "/cuda-samples/sample Starting..."
    assert 'Device 0: "NVIDIA A100-SXM4-40GB"' in text
    assert "  CUDA Driver Version / Runtime Version          13.0 / 12.5" in text
    assert "  CUDA Capability Major/Minor version number:    8.0" in text
    assert (
        "  Total amount of global memory:                 40536 MBytes (42505273344 bytes)" in text
    )
    assert "  (108) Multiprocessors, (064) CUDA Cores/MP:    6912 CUDA Cores" in text
    assert run.lines[-2:] == [
        "deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = 13.0, "
        "CUDA Runtime Version = 12.5, NumDevs = 1",
        "Result = PASS",
    ]


def test_it_reports_less_memory_than_the_published_capacity() -> None:
    for device in (H100[0], A100[0]):
        published = parse_quantity(device.capacity()["memory"]["value"])
        assert device.cuda_memory_bytes < published


def test_it_prints_hopper_with_128_cores_per_multiprocessor() -> None:
    text = "\n".join(cuda.device_query(H100[:1]).lines)
    assert "  CUDA Capability Major/Minor version number:    9.0" in text
    assert "  (132) Multiprocessors, (128) CUDA Cores/MP:    16896 CUDA Cores" in text


def test_it_follows_the_shape_of_a_real_device_query() -> None:
    real = REFERENCE.read_text().splitlines()
    # The reference was built from the 13.0 samples, which dropped this 12.5 line.
    ours = [line for line in cuda.device_query(H100[:1]).lines if "MultiDevice Co-op" not in line]
    assert len(ours) == len(real)
    assert labels(ours[1:-2]) == labels(real[1:-2])
    assert ours[-1] == real[-1] == "Result = PASS"


def test_it_prints_one_block_per_device_and_peer_access() -> None:
    run = cuda.device_query(H100[:2])
    assert "Detected 2 CUDA Capable device(s)" in run.lines
    assert sum(line.startswith("Device ") for line in run.lines) == 2
    peer = "> Peer access from NVIDIA H100 80GB HBM3 (GPU0) -> NVIDIA H100 80GB HBM3 (GPU1) : Yes"
    assert peer in run.lines
    assert run.lines[-2].endswith("NumDevs = 2")


def test_it_fails_device_query_without_a_gpu() -> None:
    run = cuda.device_query([])
    assert run.exit_code == 1
    assert run.lines[-3:] == [
        "cudaGetDeviceCount returned 100",
        "-> no CUDA-capable device is detected",
        "Result = FAIL",
    ]


def test_it_names_a_mig_device_by_profile() -> None:
    mig = topology.load(Path(topology.__file__).parent / "topologies" / "mig-example.yaml")
    device = mig.devices_by_node["mig-node-1"][0]
    text = "\n".join(cuda.device_query([device]).lines)
    assert 'Device 0: "NVIDIA A100-SXM4-40GB MIG 1g.5gb"' in text
    assert "(014) Multiprocessors" in text
