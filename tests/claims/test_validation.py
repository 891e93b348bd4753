"""What users type gets a reason they can act on, never a stack trace."""

from __future__ import annotations

import pytest

from claims.validation import dns_label_problem, selector_problem


@pytest.mark.parametrize("name", ["a", "team-a", "gpu0", "0gpu", "a" * 63])
def test_it_accepts_dns_1123_labels(name: str) -> None:
    assert dns_label_problem(name) is None


def test_it_names_the_characters_that_are_not_allowed() -> None:
    assert (
        dns_label_problem("team.a_b")
        == "Only letters a-z, digits and '-' are allowed, not '.' '_'."
    )


def test_it_counts_what_is_too_long() -> None:
    assert dns_label_problem("a" * 70) == "At most 63 characters (this one has 70)."


def test_it_accepts_a_cel_selector_and_explains_a_broken_one() -> None:
    assert selector_problem("device.attributes['gpu.nvidia.com'].productName == 'H100'") is None
    assert selector_problem("") is None
    assert selector_problem("device.attributes[").startswith("Not a valid CEL expression")


def test_it_refuses_a_selector_longer_than_kubernetes_allows() -> None:
    clause = "device.attributes['gpu.nvidia.com'].productName == 'H100'"
    longest = " || ".join([clause] * 200)[:10240].rsplit(" || ", 1)[0]
    assert selector_problem(longest) is None
    too_long = longest + " || " + clause
    assert len(too_long.encode()) > 10240
    problem = selector_problem(too_long)
    assert problem.startswith("At most 10240 bytes (10 KiB)")
    assert f"this one has {len(too_long.encode())}" in problem
