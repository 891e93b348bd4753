"""Long-poll: answer as soon as an object's state differs from the one the client knows."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Model
from rest_framework import serializers
from rest_framework.request import Request

from claims import changes


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


def wait_for_state_change(
    model: type[Model], pk: int, known_state: str, seconds: float, *, user_key: Any
) -> None:
    """Wait until the state changes or the time is up, woken by the object's change signal.

    Past the bound on waiting requests it returns at once: the client sees the state it
    knows and asks again, as after a wait that timed out.
    """

    def changed() -> bool:
        state = model._default_manager.filter(pk=pk).values_list("state", flat=True).first()
        return state != known_state

    changes.wait_in_turn(
        user_key,
        [changes.channel_of(model, pk)],
        changed,
        seconds=seconds,
        poll_seconds=settings.API_LONG_POLL_INTERVAL_SECONDS,
    )
