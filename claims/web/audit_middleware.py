"""The middleware that remembers the request being served, for the audit rows written while
serving it (claims.domain.audit says where each action came from)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from claims.domain.audit import current_request


class AuditContextMiddleware:
    """Remembers the request being served, for the rows written while serving it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            current_request.reset(token)
