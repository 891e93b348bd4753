"""Pages of the list endpoints: numbered pages or cursor pages, neither with a count.

Numbered pages read one row more than the page to know whether another follows: counting
everything the filters match cost more than the page itself as the list grew. They still
get slower the further they go (OFFSET); a client reading a large list asks for cursor pages
instead (`?cursor=` to start): newest first by id, each page an indexed range.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework import pagination
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from claims.api.filters import BIGINT
from claims.policy.limits import API_MAX_PAGE_SIZE, API_PAGE_SIZE


def page_size_of(request: Request) -> int:
    """?page_size= capped at the maximum; anything but a positive number is a 400 (DRF
    would quietly use the default, which the schema cannot describe)."""
    raw = request.query_params.get("page_size")
    if raw is None:
        return API_PAGE_SIZE
    size = int(raw) if raw.isdecimal() else 0
    if size < 1:
        raise ValidationError({"page_size": [gettext("A whole number, 1 or more.")]})
    return min(size, API_MAX_PAGE_SIZE)


class PageNumberPagination(pagination.PageNumberPagination):
    """?page=N of page_size rows, with links to the pages around it and no count."""

    page_size = API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = API_MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int:
        return page_size_of(request)

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any]:
        self.url = request.build_absolute_uri()
        size = self.get_page_size(request)
        raw = request.query_params.get(self.page_query_param) or "1"
        number = int(raw) if raw.isascii() and raw.isdecimal() and len(raw) < 10 else 0
        if number < 1:
            raise NotFound(self.invalid_page_message.format(page_number=raw, message=""))
        start = (number - 1) * size
        rows = list(queryset[start : start + size + 1])
        if not rows and number > 1:
            raise NotFound(self.invalid_page_message.format(page_number=raw, message=""))
        self.number, self.more = number, len(rows) > size
        return rows[:size]

    def get_paginated_response(self, data: Any) -> Response:
        links = {"next": self.get_next_link(), "previous": self.get_previous_link()}
        return Response({**links, "results": data})

    def get_next_link(self) -> str | None:
        if not self.more:
            return None
        return replace_query_param(self.url, self.page_query_param, self.number + 1)

    def get_previous_link(self) -> str | None:
        if self.number == 1:
            return None
        if self.number == 2:
            return remove_query_param(self.url, self.page_query_param)
        return replace_query_param(self.url, self.page_query_param, self.number - 1)


class CursorPagination(pagination.CursorPagination):
    ordering = "-id"
    page_size = API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = API_MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int:
        return page_size_of(request)

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        if "ordering" in request.query_params:
            message = gettext("Cursor pages are newest first; leave it out.")
            raise ValidationError({"ordering": [message]})
        return super().paginate_queryset(queryset, request, view)

    def get_ordering(self, request: Request, queryset: Any, view: Any) -> tuple[str, ...]:
        return (self.ordering,)

    def decode_cursor(self, request: Request) -> pagination.Cursor | None:
        cursor = super().decode_cursor(request)
        # The position goes into the query as an id: a forged one must be a 404, not a 500.
        position = cursor.position if cursor else None
        if position is not None and not _is_id(str(position)):
            raise NotFound(self.invalid_cursor_message)
        return cursor


def _is_id(text: str) -> bool:
    digits = text[1:] if text.startswith("-") else text
    return digits.isdecimal() and digits.isascii() and abs(int(text)) <= BIGINT


class ListPagination(pagination.BasePagination):
    """Numbered pages, or cursor pages when the request has ?cursor= (empty for the first)."""

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        cursor = "cursor" in request.query_params
        self.chosen = CursorPagination() if cursor else PageNumberPagination()
        return self.chosen.paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data: Any) -> Response:
        return self.chosen.get_paginated_response(data)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        numbered = PageNumberPagination().get_schema_operation_parameters(view)
        cursor = CursorPagination().get_schema_operation_parameters(view)
        parameters = [*numbered, *(p for p in cursor if p["name"] == "cursor")]
        for parameter in parameters:
            if parameter["name"] == "page":
                parameter["schema"]["minimum"] = 1
            if parameter["name"] == "page_size":
                parameter["schema"]["minimum"] = 1
                parameter["description"] = f"Results per page (at most {API_MAX_PAGE_SIZE})."
            if parameter["name"] == "cursor":
                parameter["description"] = (
                    "Cursor pages, newest first and without a count: give it empty for the "
                    "first page, then follow `next`."
                )
        return parameters

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["results"],
            "properties": {
                "next": {
                    **link,
                    "description": "The next page; null on the last.",
                    "example": "https://portal.example.org/api/v1/claims/?page=3",
                },
                "previous": {
                    **link,
                    "description": "The page before; null on the first.",
                    "example": "https://portal.example.org/api/v1/claims/?page=1",
                },
                "results": schema,
            },
        }
