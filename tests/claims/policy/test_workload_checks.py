"""What a workload may run: image references, shell words, env names, quantities, ports."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from claims.policy import workloads as checks


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "ubuntu:22.04",
        "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
        "quay.io/jupyter/pytorch-notebook:cuda12-latest",
        "localhost:5000/team/train@sha256:" + "a" * 64,
        "registry.example.com:443/a/b/c:v1.2_3",
    ],
)
def test_it_accepts_image_references(image: str) -> None:
    assert checks.image_problem(image) is None


@pytest.mark.parametrize(
    ("image", "words"),
    [
        ("", "Enter an image"),
        ("nvcr.io/nvidia/CUDA:12", "is not an image reference"),
        ("my image", "no spaces"),
        ("busybox:", "is not an image reference"),
        ("busybox@sha256:abc", "is not an image reference"),
        ("-bad/x", "is not an image reference"),
    ],
)
def test_it_refuses_what_is_not_an_image_reference(image: str, words: str) -> None:
    assert words in (checks.image_problem(image) or "")


def test_an_image_is_allowed_by_the_profile_a_list_or_a_prefix() -> None:
    listed = ["nvcr.io/nvidia/*", "ghcr.io/team/train:v1"]
    allowed = lambda image: checks.image_allowed(  # noqa: E731
        image, default="busybox", allow_any=False, listed=listed
    )
    assert allowed("busybox")
    assert allowed("nvcr.io/nvidia/pytorch:24.05-py3")
    assert allowed("ghcr.io/team/train:v1")
    assert not allowed("ghcr.io/team/train:v2")
    assert not allowed("docker.io/evil/miner")
    assert checks.image_allowed("anything", default="busybox", allow_any=True, listed=[])


def test_a_command_that_does_not_parse_is_a_field_error() -> None:
    assert checks.shell_words("python -c 'print(1)'", "command") == ["python", "-c", "print(1)"]
    with pytest.raises(ValidationError) as refused:
        checks.shell_words("python -c 'print(1)", "command")
    assert "does not parse as shell words" in refused.value.message_dict["command"][0]


def test_environment_names_follow_kubernetes_rules() -> None:
    assert checks.env_problems({"EPOCHS": "3", "my.var-1": "x", "_X": ""}) == []
    [problem] = checks.env_problems({"1ST": "x"})
    assert "'1ST' is not a name Kubernetes accepts" in problem
    assert len(checks.env_problems({"A B": "x", "A=B": "x", "..": "x"})) == 3
    assert checks.env_problems({"N": 3}) == ["The value of N must be text."]
    assert checks.parse_env_lines("A=1\n\nB = two=2") == {"A": "1", "B": " two=2"}
    with pytest.raises(ValidationError):
        checks.parse_env_lines("JUSTANAME")


def test_quantities_and_requests_within_limits() -> None:
    ok = {"cpu_request": "500m", "cpu_limit": "2", "memory_request": "1Gi", "memory_limit": "2Gi"}
    assert checks.resource_problems(ok) == {}
    errors = checks.resource_problems(
        {"cpu_request": "4 cores", "memory_request": "1.2.3", "memory_limit": "-1Gi"}
    )
    assert set(errors) == {"cpu_request", "memory_request", "memory_limit"}
    assert "'4 cores' is not a Kubernetes quantity" in errors["cpu_request"][0]
    over = checks.resource_problems({"memory_request": "4Gi", "memory_limit": "1Gi"})
    assert over == {"memory_request": ["The request is more than the limit."]}
    assert checks.resources_of(ok) == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }


def test_ports_are_numbers_in_range() -> None:
    assert checks.port_problems([8888, 6006]) == []
    assert checks.port_problems([0]) == ["Port 0 is out of range (1 to 65535)."]
    assert checks.port_problems([70000])
    assert checks.port_problems(["http"]) == ["'http' is not a port number."]
    assert checks.port_problems([80, 80]) == ["A port is listed twice."]
    assert checks.parse_ports("8888, 6006 x") == [8888, 6006, "x"]
