"""Long-poll: answer as soon as an object's state differs from the one the client knows."""

from __future__ import annotations

import time

from django.conf import settings
from django.db.models import Model
from rest_framework import serializers
from rest_framework.request import Request


class WaitParams(serializers.Serializer):
    wait = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="Seconds to wait for a state other than `state` (capped at 60).",
    )
    state = serializers.CharField(
        required=False, help_text="The state you know; required with `wait`."
    )

    def validate_state(self, state: str) -> str:
        states = self.context["states"]
        if state not in states:
            raise serializers.ValidationError(f"Not a state; one of {', '.join(states)}.")
        return state

    def validate(self, attrs: dict) -> dict:
        if attrs.get("wait") and "state" not in attrs:
            raise serializers.ValidationError({"state": ["Say which state you know, to wait."]})
        return attrs


def wait_params(request: Request, states: list[str]) -> tuple[float, str | None]:
    """The (seconds, known state) a request asks to wait for; 400 on bad values."""
    params = WaitParams(data=request.query_params, context={"states": states})
    params.is_valid(raise_exception=True)
    seconds = min(params.validated_data.get("wait") or 0, settings.API_LONG_POLL_MAX_SECONDS)
    return seconds, params.validated_data.get("state")


def wait_for_state_change(model: type[Model], pk: int, known_state: str, seconds: float) -> None:
    """Sleep between cheap reads of the state until it changes or the time is up."""
    deadline = time.monotonic() + seconds
    interval = settings.API_LONG_POLL_INTERVAL_SECONDS
    while True:
        current = model._default_manager.filter(pk=pk).values_list("state", flat=True).first()
        remaining = deadline - time.monotonic()
        if current != known_state or remaining <= 0:
            return
        time.sleep(min(interval, remaining))
