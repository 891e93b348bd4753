"""Kubernetes `Status` errors, worded as the real API server words them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    # A conflict with the resourceVersion the client sent, rather than with a concurrent write.
    sent_by_client: bool = False

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # a proxied error (the kubelet unreachable) has no reason
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


def qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def _details(group: str, kind: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name} if name else {}  # Go's omitempty
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    message = f'{qualified(group, plural)} "{name}" not found'
    return ApiError(404, "NotFound", message, _details(group, plural, name))


def already_exists(group: str, plural: str, name: str) -> ApiError:
    message = f'{qualified(group, plural)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(group, plural, name))


def conflict(group: str, plural: str, name: str, *, by_client: bool = False) -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": the object '
        "has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(group, plural, name), by_client)


def uid_precondition_failed(group: str, kind: str, name: str, sent: str, stored: str) -> ApiError:
    """A delete whose preconditions.uid names another object (rest.BeforeDelete's words:
    the group-resource there is the Kind, not the plural)."""
    message = (
        f'Operation cannot be fulfilled on {qualified(group, kind)} "{name}": the UID in the '
        f"precondition ({sent}) does not match the UID in record ({stored}). The object might "
        "have been deleted and then recreated"
    )
    return ApiError(409, "Conflict", message, _details(group, kind, name))


def namespace_terminating(group: str, plural: str, name: str, namespace: str) -> ApiError:
    """A create in a terminating namespace, refused by NamespaceLifecycle admission (which
    adds the NamespaceTerminating cause)."""
    message = (
        f'{qualified(group, plural)} "{name}" is forbidden: unable to create new content in '
        f"namespace {namespace} because it is being terminated"
    )
    cause = {
        "reason": "NamespaceTerminating",
        "message": f"namespace {namespace} is being terminated",
        "field": "metadata.namespace",
    }
    details = _details(group, plural, name) | {"causes": [cause]}
    return ApiError(403, "Forbidden", message, details)


def resource_version_precondition_failed(
    group: str, kind: str, name: str, sent: str, stored: str
) -> ApiError:
    """A delete whose preconditions.resourceVersion is not the stored one (rest.BeforeDelete)."""
    message = (
        f'Operation cannot be fulfilled on {qualified(group, kind)} "{name}": the '
        f"ResourceVersion in the precondition ({sent}) does not match the ResourceVersion in "
        f"record ({stored}). The object might have been modified"
    )
    return ApiError(409, "Conflict", message, _details(group, kind, name))


def invalid(group: str, kind: str, name: str, field_errors: list[Any]) -> ApiError:
    """422 Invalid from B's `FieldError`s (they render themselves as apimachinery does)."""
    rendered = [error.message() for error in field_errors]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    details = _details(group, kind, name)
    details["causes"] = [error.cause() for error in field_errors]
    message = f'{qualified_kind} "{name}" is invalid: {summary}'
    return ApiError(422, "Invalid", message, details)


@dataclass
class GenericError(ApiError):
    """apierrors.NewGenericServerResponse, go-restful's answer for a path or method inside an
    API group it has no route for: its Status always carries `details`, empty or not."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        body.setdefault("details", {})
        body["code"] = body.pop("code")
        return body


def forbidden(group: str, resource: str, name: str, message: str) -> ApiError:
    """apierrors.NewForbidden."""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    if not resource and not group:
        return ApiError(403, "Forbidden", f"forbidden: {message}", details)
    resource_name = qualified(group, resource)
    subject = f'{resource_name} "{name}"' if name else resource_name
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {message}", details)


def resource_not_found() -> ApiError:
    return GenericError(404, "NotFound", "the server could not find the requested resource")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiError:
    message = "the server does not allow this method on the requested resource"
    return GenericError(405, "MethodNotAllowed", message)


def unsupported_media_type() -> ApiError:
    """go-restful's answer to a Content-Type the route does not consume (a PATCH's)."""
    return GenericError(415, "UnsupportedMediaType", "415: Unsupported Media Type")


def unsupported_patch_type(accepted: tuple[str, ...]) -> ApiError:
    """negotiation.NewUnsupportedMediaTypeError: a custom resource's PATCH in a type its
    handler does not take (strategic merge patch)."""
    message = "the body of the request was in an unknown format - accepted media types include: "
    return ApiError(415, "UnsupportedMediaType", message + ", ".join(accepted))


def not_acceptable(produces: tuple[str, ...]) -> ApiError:
    """go-restful's answer to an Accept header the route cannot produce."""
    message = "406: Not Acceptable\n\nAvailable representations: " + ", ".join(produces)
    return GenericError(406, "NotAcceptable", message)


def too_large() -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError, a 504 after waiting for the revision."""
    message = f"Timeout: Too large resource version: {wanted}, current: {current}"
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return ApiError(504, "Timeout", message, {"causes": [cause], "retryAfterSeconds": 1})


def expired(rv: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {rv} ({oldest})")


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
