"""OpenAPI details every operation shares: error answers and the Idempotency-Key header."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from claims.api.errors import IdempotencyKeyReused, StateConflict
from claims.api.idempotency import KEY_PATTERN


class ErrorDetail(serializers.Serializer):
    detail = serializers.CharField()


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "pattern": f"^{KEY_PATTERN.pattern}$"},
    location=OpenApiParameter.HEADER,
    description="Retry-safe POST: the same key and body return the first response again; "
    "the same key with another body is refused with 422.",
)

ERRORS = {
    400: "Bad input: field names with what is wrong.",
    401: "No valid token or session.",
    403: "Not allowed (e.g. approving without being an approver), or CSRF missing.",
    404: "No such object (or page), or it belongs to someone else.",
    409: StateConflict.default_detail,
    413: "The body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE allows.",
    415: "The body's Content-Type is none of JSON, form or multipart.",
    422: IdempotencyKeyReused.default_detail,
    429: "Too many requests; wait as long as the Retry-After header says.",
}


class ApiSchema(AutoSchema):
    def get_override_parameters(self) -> list[Any]:
        parameters = super().get_override_parameters()
        if self.method == "POST" and getattr(self.view, "replays_idempotency_key", True):
            parameters = [*parameters, IDEMPOTENCY_KEY]
        return parameters

    def _get_response_bodies(
        self, direction: Literal["request", "response"] = "response"
    ) -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            responses.setdefault(str(code), self._error_response(code))
        return responses

    def _error_codes(self) -> list[int]:
        codes = [400, 401, 403, 429]
        if "{" in self.path or (self.method == "GET" and self._is_list_view()):
            codes.append(404)
        if self.method in ("POST", "DELETE"):
            codes.append(409)
        if self.method == "POST":
            codes += [413, 415]
        if self.method == "POST" and getattr(self.view, "replays_idempotency_key", True):
            codes.append(422)
        return codes

    def _error_response(self, code: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"$ref": "#/components/schemas/ErrorDetail"}
        if code == 400:
            field = {"type": "array", "items": {"type": "string"}}
            # A list's items' errors (a claim's `alternatives`): by index, then by field.
            by_index = {
                "type": "object",
                "additionalProperties": {"type": "object", "additionalProperties": field},
            }
            schema = {"type": "object", "additionalProperties": {"anyOf": [field, by_index]}}
            schema = {"anyOf": [schema, {"$ref": "#/components/schemas/ErrorDetail"}]}
        self._register_error_detail()
        return {"content": {"application/json": {"schema": schema}}, "description": ERRORS[code]}

    def _register_error_detail(self) -> None:
        self.resolve_serializer(ErrorDetail, "response")
