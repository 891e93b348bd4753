"""Equality and ordering across numbers and kinds, as Kubernetes' CEL (cel-go) evaluates them.

Device attributes are typed `any` in the DRA environment, so a selector may compare an int
attribute with a double or uint literal: the API server accepts it (cross-type numeric
comparisons are on from 1.28) and cel-go compares by value (heterogeneous equality).
"""

import pytest

import dracel

DEVICE = {
    "attributes": {
        "index": {"int": 1},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "healthy": {"bool": True},
    },
    "capacity": {"memory": {"value": "81559Mi"}},
}
GPU = "device.attributes['gpu.nvidia.com']"


def holds(expression: str) -> bool:
    assert dracel.compile_error(expression) is None, expression
    return dracel.matches(expression, dracel.device_activation("gpu.nvidia.com", DEVICE))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"{GPU}.index == 1.0", True),
        (f"{GPU}.index == 1.5", False),
        (f"{GPU}.index != 1.0", False),
        (f"{GPU}.index > 0.5", True),
        (f"{GPU}.index >= 1.0", True),
        (f"{GPU}.index < 1.5", True),
        (f"{GPU}.index <= 0.9", False),
        (f"{GPU}.index == 1u", True),
        (f"{GPU}.index < 2u", True),
        (f"{GPU}.index > 1u", False),
        (f"{GPU}.index in [1.0, 3.0]", True),
        (f"{GPU}.index in [2u, 3u]", False),
        (f"{GPU}.index in {{1.0: 'first'}}", True),
        ("-1 < 0u", True),
        ("18446744073709551615u > 1.0", True),
        ("dyn(1) == 1.0", True),
        ("dyn([1, 2]) == [1.0, 2u]", True),
        ("dyn({1: 'a'}) == {1.0: 'a'}", True),
        ("dyn(double('NaN')) == double('NaN')", False),
    ],
)
def test_numbers_compare_by_value_across_int_uint_and_double(expression, expected):
    assert holds(expression) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"{GPU}.productName == 1", False),
        (f"{GPU}.productName != 1", True),
        (f"{GPU}.healthy == 1", False),
        (f"{GPU}.index == 'one'", False),
        ("dyn(null) == 0", False),
        ("dyn([1]) == {1: 1}", False),
        (f"{GPU}.index in ['1']", False),
    ],
)
def test_values_of_different_kinds_are_unequal_not_an_error(expression, expected):
    assert holds(expression) is expected


@pytest.mark.parametrize(
    "expression",
    [
        # No ordering between kinds: "no such overload" at run time, so nothing matches.
        f"{GPU}.productName > 1",
        f"!({GPU}.productName > 1)",
        # A semver (or quantity) on the left of == only compares with its own kind.
        f"{GPU}.cudaComputeCapability == '9.0.0'",
        f"!({GPU}.cudaComputeCapability == '9.0.0')",
        # NaN cannot be ordered.
        f"{GPU}.index < double('NaN')",
        f"!({GPU}.index < double('NaN'))",
    ],
)
def test_comparisons_cel_go_has_no_overload_for_are_errors(expression):
    assert holds(expression) is False


def test_semver_and_quantity_equal_their_own_kind_by_value():
    assert holds(f"{GPU}.cudaComputeCapability == semver('9.0.0')")
    assert holds("device.capacity['gpu.nvidia.com'].memory == quantity('81559Mi')")
    assert holds("quantity('1Gi') == quantity('1024Mi')")
    assert holds(f"'9.0.0' != {GPU}.cudaComputeCapability")  # a string on the left: unequal


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("1 == 1.0", "found no matching overload for '_==_' applied to '(int, double)'"),
        ("'a' == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ("[1] == [1.0]", "applied to '(list(int), list(double))'"),
    ],
)
def test_checker_still_refuses_mixed_literals_as_cel_go_does(expression, detail):
    """Heterogeneous equality is a run-time rule; cel-go's checker types `_==_` as (A, A)."""
    assert detail in (dracel.compile_error(expression) or "")


@pytest.mark.parametrize("expression", ["1 < 2.0", "2u > 1", "1.5 >= 1u"])
def test_checker_accepts_cross_type_ordering_of_literals(expression):
    assert holds(expression)
