"""What users type gets a reason they can act on, never a stack trace."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from claims.models import Cluster
from claims.policy.device_picker import Picks
from claims.policy.validation import (
    claim_selector,
    dns_label_problem,
    selector_field_of,
    selector_problem,
)


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


def test_it_puts_a_problem_of_a_picked_selector_next_to_the_pick() -> None:
    assert selector_field_of(None, "") == "selector"
    assert selector_field_of(Picks(gpu_model="X"), "device.driver != ''") == "selector"
    assert selector_field_of(Picks(gpu_model="X", min_memory="1Gi"), "") == "gpu_model"
    assert selector_field_of(Picks(mig_profile="1g.5gb"), "") == "mig_profile"
    assert selector_field_of(Picks(min_memory="1Gi"), "") == "min_memory"


def test_it_joins_the_picks_and_the_written_cel(cluster: Cluster) -> None:
    written = "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"

    selector = claim_selector(
        cluster=cluster,
        device_class="gpu.nvidia.com",
        picks=Picks(min_memory="80Gi"),
        selector=written,
    )

    assert selector == (
        f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0 && ({written})"
    )
    assert selector_problem(selector) is None


def test_it_refuses_picks_the_cluster_does_not_publish_with_field_errors(cluster: Cluster) -> None:
    with pytest.raises(ValidationError) as refused:
        claim_selector(
            cluster=cluster,
            device_class="gpu.nvidia.com",
            picks=Picks(gpu_model="NVIDIA B200", min_memory="8 GB"),
            selector="",
        )

    assert sorted(refused.value.message_dict) == ["gpu_model", "min_memory"]


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ("device.driver ==", "line 1, column 17: it ends too soon: a value is missing at the end."),
        ("device.driver == == 'x'", "line 1, column 18: a value is missing before '=='."),
        ("(device.driver == 'x'", "line 1, column 22: it ends too soon: ')' is missing."),
        ("device.driver = 'x'", "line 1, column 15: '=' cannot be used here."),
        (
            "device.driver == 'x",
            "line 1, column 18: the text that starts here has no closing quote.",
        ),
        ("device.driver == 'x') ", "line 1, column 21: ')' is not expected here."),
        ("device.driver == 'x' &&\n  device.driver ==", "line 2, column 19: it ends too soon"),
        ("device.atributes['a'].b == 1", "line 1, column 7: undefined field 'atributes'."),
        ("device.driver == 1", "column 15: found no matching overload for '==' applied to"),
    ],
)
def test_it_says_shortly_what_is_wrong_with_the_cel_and_where(selector: str, said: str) -> None:
    problem = selector_problem(selector)

    assert problem is not None
    assert problem.startswith("Not a valid CEL expression at line ")
    assert said in problem
    # Not the parser's dump: no token list, no copy of the input with a caret under it.
    assert "expecting" not in problem and "mismatched input" not in problem
    assert "\n" not in problem and "^" not in problem


def test_it_says_a_selector_must_be_a_condition() -> None:
    assert selector_problem("device.driver") == (
        "Not a valid CEL expression: it must be a condition (true or false), not a string."
    )
