"""Shared shape of the detail and action endpoints: fetch through a scoped selector, call one
service, answer with the object as it is now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Model
from django.http import Http404
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import call_service
from claims.api.longpoll import BUSY_RETRY_AFTER, wait_for_state_change, wait_params
from claims.api.permissions import IsApprover
from claims.api.views.base import ApiView
from claims.policy import limits

WAIT_PARAMETERS = [
    OpenApiParameter(
        "wait",
        {"type": "integer", "minimum": 0},
        description="Long-poll: wait up to this many seconds (max 60) for a state other "
        "than `state`; the answer comes as soon as it changes.",
    ),
    OpenApiParameter("state", str, description="The state you know (with `wait`)."),
    OpenApiParameter(
        "until",
        str,
        description="Comma-separated states (with `wait`): answer once the state is one of "
        "them, not at every change.",
    ),
]


@extend_schema_serializer(
    examples=[OpenApiExample("Why not", value={"reason": "Use team-a's namespace."})]
)
class ReasonInput(serializers.Serializer):
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=limits.REASON_MAX_CHARS
    )


def given_reason(request: Request) -> str:
    """The reason a rejection gives (may be empty); a 400 when it is too long."""
    serializer = ReasonInput(data=request.data)
    serializer.is_valid(raise_exception=True)
    return str(serializer.validated_data["reason"])


class ObjectApi(ApiView):
    """An object of one kind: `getter` is its permission-scoped selector."""

    filter_backends: list[Any] = []
    getter: Callable[..., Model]
    output: type[serializers.Serializer]

    def get_object(self) -> Any:
        return type(self).getter(user=self.request.user, pk=self.kwargs["pk"])

    def respond(self, obj: Any, status: int = 200) -> Response:
        return Response(self.output(obj).data, status=status)

    def retrieve_after_wait(self, request: Request) -> Response:
        """GET, or with ?wait=&state= the answer once the state differs (long-poll)."""
        obj = self.get_object()
        wait = wait_params(request, list(obj.State.values))
        if not wait.needed(obj.state):
            return self.respond(obj)
        waited = wait_for_state_change(type(obj), obj.pk, wait, user_key=request.user.pk)
        if waited is None:  # not let wait: what was just read, and when to ask again
            response = self.respond(obj)
            response["Retry-After"] = str(BUSY_RETRY_AFTER)
            return response
        return self.respond(self.get_object())

    def act(self, service: Callable[..., Any], target: str, **extra: Any) -> Response:
        """Call a service on the object; the service decides if it is allowed."""
        obj = self.get_object()
        result = call_service(service, user=self.request.user, **{target: obj}, **extra)
        return self.respond(result)


class ApproverActionApi(ObjectApi):
    permission_classes = [IsAuthenticated, IsApprover]


def visible_or_field_error(getter: Callable[..., Model], user: Any, pk: int, field: str) -> Any:
    """The object a request names, or a 400 on that field (never a hint it exists)."""
    try:
        return getter(user=user, pk=pk)
    except Http404:
        what = field.replace("_", " ")
        message = gettext("You have no %(what)s %(id)s.") % {"what": what, "id": pk}
        raise ValidationError({field: [message]}) from None
