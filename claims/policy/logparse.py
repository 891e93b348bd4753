"""Read the CUDA samples' logs: vectorAdd's verdict and deviceQuery's devices.

Pure Python; logs may be cut off or garbled, so every parser returns what it found
and never raises.
"""

import re
from dataclasses import dataclass, field

VECTOR_ADD_PASSED = re.compile(r"^\s*Test PASSED\s*$", re.MULTILINE)
VECTOR_ADD_FAILED = re.compile(
    r"^\s*(Result verification failed at element \d+!|Failed to .*)$", re.MULTILINE
)
DEVICE_HEADER = re.compile(r'^Device (\d+): "(.*)"\s*$', re.MULTILINE)
VERSIONS = re.compile(r"CUDA Driver Version / Runtime Version\s+(\d+\.\d+) / (\d+\.\d+)")
CAPABILITY = re.compile(r"CUDA Capability Major/Minor version number:\s+(\d+\.\d+)")
GLOBAL_MEMORY = re.compile(r"Total amount of global memory:\s+(\d+) MBytes")
DEVICE_QUERY_RESULT = re.compile(r"^\s*Result = (PASS|FAIL)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class VectorAddResult:
    passed: bool | None
    failure: str = ""


@dataclass(frozen=True)
class QueriedDevice:
    index: int
    name: str
    compute_capability: str | None
    memory_mib: int | None
    driver_version: str | None
    runtime_version: str | None


@dataclass(frozen=True)
class DeviceQueryResult:
    passed: bool | None
    devices: list[QueriedDevice] = field(default_factory=list)


def parse_vector_add(text: str) -> VectorAddResult:
    """passed is None while the sample has not printed its verdict yet."""
    failure = VECTOR_ADD_FAILED.search(text)
    if failure:
        return VectorAddResult(passed=False, failure=failure.group(1))
    if VECTOR_ADD_PASSED.search(text):
        return VectorAddResult(passed=True)
    return VectorAddResult(passed=None)


def _first(pattern: re.Pattern[str], block: str, group: int = 1) -> str | None:
    match = pattern.search(block)
    return match.group(group) if match else None


def _device_from_block(index: int, name: str, block: str) -> QueriedDevice:
    memory = _first(GLOBAL_MEMORY, block)
    return QueriedDevice(
        index=index,
        name=name,
        compute_capability=_first(CAPABILITY, block),
        memory_mib=int(memory) if memory else None,
        driver_version=_first(VERSIONS, block, 1),
        runtime_version=_first(VERSIONS, block, 2),
    )


def _devices(text: str) -> list[QueriedDevice]:
    headers = list(DEVICE_HEADER.finditer(text))
    devices = []
    for position, header in enumerate(headers):
        end = headers[position + 1].start() if position + 1 < len(headers) else len(text)
        block = text[header.end() : end]
        devices.append(_device_from_block(int(header.group(1)), header.group(2), block))
    return devices


def parse_device_query(text: str) -> DeviceQueryResult:
    """passed is None until deviceQuery prints its `Result = ...` line."""
    results = DEVICE_QUERY_RESULT.findall(text)
    passed = results[-1] == "PASS" if results else None
    return DeviceQueryResult(passed=passed, devices=_devices(text))
