"""Turn what the services raise into API answers: field errors 400, state conflicts 409."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext_lazy
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.settings import api_settings

T = TypeVar("T")


class StateConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = gettext_lazy("The object is not in a state that allows this.")
    default_code = "state_conflict"


class IdempotencyKeyReused(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = gettext_lazy(
        "This Idempotency-Key was already used with a different request (another body or "
        "endpoint). Send a new key for a new request."
    )
    default_code = "idempotency_key_reused"


def call_service(service: Callable[..., T], **kwargs: Any) -> T:
    """Call a service; its field errors become a 400, a state conflict a 409."""
    try:
        return service(**kwargs)
    except DjangoValidationError as error:
        raise api_error(error) from None


def api_error(error: DjangoValidationError) -> APIException:
    if not hasattr(error, "error_dict"):
        return StateConflict(" ".join(error.messages))
    fields = error.message_dict
    if set(fields) == {NON_FIELD_ERRORS}:
        # The services put a state conflict (not a bad field) under NON_FIELD_ERRORS.
        return StateConflict(" ".join(fields[NON_FIELD_ERRORS]))
    non_field_key = api_settings.NON_FIELD_ERRORS_KEY
    return ValidationError(
        {non_field_key if key == NON_FIELD_ERRORS else key: msgs for key, msgs in fields.items()}
    )
