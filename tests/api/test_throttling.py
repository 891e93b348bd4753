"""Throttling per user: one script in a loop cannot starve everybody else."""

from __future__ import annotations

from collections.abc import Callable

from django.test import override_settings
from rest_framework.test import APIClient

from portal.api_settings import REST_FRAMEWORK

Api = Callable[[str], APIClient]
TIGHT = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "3/minute", "anon": "2/minute"}}


@override_settings(REST_FRAMEWORK=TIGHT)
def test_it_slows_down_one_user_and_not_the_others(api: Api) -> None:
    alice = api("alice")
    statuses = [alice.get("/api/v1/me/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert int(alice.get("/api/v1/me/")["Retry-After"]) > 0
    assert api("bob").get("/api/v1/me/").status_code == 200


@override_settings(REST_FRAMEWORK=TIGHT)
def test_it_slows_down_anonymous_callers_by_address(api: Api) -> None:
    stranger = api("anonymous")
    statuses = [stranger.get("/api/docs/").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
