"""Pages of the list endpoints: numbered pages with a count, or cursor pages without one.

Numbered pages count the rows (one COUNT over everything the filters match) and get slower
the further they go (OFFSET). A client reading a large list asks for cursor pages instead
(`?cursor=` to start): newest first by id, each page an indexed range, no count.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework import pagination
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.api.filters import BIGINT
from claims.limits import API_MAX_PAGE_SIZE, API_PAGE_SIZE


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
    page_size = API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = API_MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int:
        return page_size_of(request)


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
        paged = PageNumberPagination().get_paginated_response_schema(schema)
        paged["required"] = ["results"]
        paged["properties"]["count"]["description"] = "Numbered pages only."
        return paged
