"""Long-poll: answer as soon as an object's state differs from the one the client knows, or
(with `until`) as soon as it is one the client waits for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Model
from django.utils.translation import gettext
from rest_framework import serializers
from rest_framework.request import Request

from claims.live import changes

# Seconds a client should let pass before asking again when its wait was refused (the
# process already holds as many waiting requests as it lets wait).
BUSY_RETRY_AFTER = 1


class WaitParams(serializers.Serializer):
    wait = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="Seconds to wait for a state other than `state` (capped at 60).",
    )
    state = serializers.CharField(
        required=False, help_text="The state you know; with `wait`, this or `until`."
    )
    until = serializers.CharField(
        required=False,
        help_text="Comma-separated states: with `wait`, answer once the state is one of them "
        "(instead of at every change).",
    )

    def validate_state(self, state: str) -> str:
        return self._known(state)

    def validate_until(self, until: str) -> list[str]:
        return [self._known(state.strip()) for state in until.split(",") if state.strip()]

    def _known(self, state: str) -> str:
        states = self.context["states"]
        if state not in states:
            raise serializers.ValidationError(
                gettext("Not a state; one of %(states)s.") % {"states": ", ".join(states)}
            )
        return state

    def validate(self, attrs: dict) -> dict:
        if attrs.get("wait") and "state" not in attrs and not attrs.get("until"):
            raise serializers.ValidationError(
                {
                    "state": [
                        gettext(
                            "Say which state you know (or `until` which you wait for), to wait."
                        )
                    ]
                }
            )
        return attrs


@dataclass(frozen=True)
class Wait:
    """What a request waits for: a state other than `known`, or (`until`) one of those."""

    seconds: float = 0
    known: str | None = None
    until: tuple[str, ...] = ()

    def is_over(self, state: str | None) -> bool:
        if self.until:
            return state in self.until
        return state != self.known

    def needed(self, state: str) -> bool:
        return (
            bool(self.seconds)
            and (self.known is not None or bool(self.until))
            and (not self.is_over(state))
        )


def wait_params(request: Request, states: list[str]) -> Wait:
    """What a request asks to wait for; 400 on bad values."""
    params = WaitParams(data=request.query_params, context={"states": states})
    params.is_valid(raise_exception=True)
    data = params.validated_data
    seconds = min(data.get("wait") or 0, settings.API_LONG_POLL_MAX_SECONDS)
    return Wait(seconds, data.get("state"), tuple(data.get("until") or ()))


def wait_for_state_change(model: type[Model], pk: int, wait: Wait, *, user_key: Any) -> bool | None:
    """Wait until the wait is over or the time is up, woken by the object's change signal.

    Past the bound on waiting requests it returns None at once: the answer tells the client
    to ask again after BUSY_RETRY_AFTER seconds (a client asking again at once would spin).
    """

    def changed() -> bool:
        state = model._default_manager.filter(pk=pk).values_list("state", flat=True).first()
        return wait.is_over(state)

    return changes.wait_in_turn(
        user_key,
        [changes.channel_of(model, pk)],
        changed,
        seconds=wait.seconds,
        poll_seconds=settings.API_LONG_POLL_INTERVAL_SECONDS,
        still_waits_in=lambda state: not wait.is_over(state),
    )
