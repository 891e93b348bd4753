"""Label selectors: apimachinery's semantics and its parser's error messages."""

from __future__ import annotations

import pytest

from kubesim.base.errors import ApiError
from kubesim.base.selectors import label_matcher


def labelled(**labels: str) -> dict:
    return {"metadata": {"labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {}, False),
        ("a!=b", {}, True),
        ("a in (b, c),x", {"a": "c", "x": ""}, True),
        ("a notin (b)", {}, True),
        ("!a", {"b": "1"}, True),
        ("a", {"a": ""}, True),
        ("a>3", {"a": "4"}, True),
        ("a<3", {"a": "x"}, False),
        ("in=notin", {"in": "notin"}, True),
    ],
)
def test_it_selects_as_upstream(selector: str, labels: dict, selected: bool) -> None:
    assert label_matcher(selector)(labelled(**labels)) is selected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            "bad selector!!",
            "unable to parse requirement: found 'selector', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("=b", "found '=', expected: !, identifier, or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ],
)
def test_it_refuses_a_malformed_selector_in_upstreams_words(selector: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        label_matcher(selector)
    assert (caught.value.code, caught.value.message) == (400, message)
