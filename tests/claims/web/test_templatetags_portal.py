"""Template helpers of claims.templatetags.portal."""

from __future__ import annotations

import pytest
from django.template.defaultfilters import truncatechars

from claims.templatetags.portal import clip


@pytest.mark.parametrize(
    "text",
    ["", "short", "x" * 400, "x" * 401, "Fine-tuning a model; " * 20, "é" * 401, "e\u0301" * 401],
)
def test_it_clips_as_truncatechars_does(text: str) -> None:
    assert clip(text, 400) == truncatechars(text, 400)
    assert clip(text, 0) == truncatechars(text, 0) == ""
