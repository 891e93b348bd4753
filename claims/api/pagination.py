from __future__ import annotations

from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.views import APIView

from claims.limits import API_MAX_PAGE_SIZE, API_PAGE_SIZE


class PageNumberPagination(pagination.PageNumberPagination):
    page_size = API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = API_MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int:
        """?page_size= capped at the maximum; anything but a positive number is a 400 (DRF
        would quietly use the default, which the schema cannot describe)."""
        raw = request.query_params.get("page_size")
        if raw is None:
            return self.page_size
        size = int(raw) if raw.isdecimal() else 0
        if size < 1:
            raise ValidationError({"page_size": ["A whole number, 1 or more."]})
        return min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == "page_size":
                parameter["description"] = f"Results per page (at most {self.max_page_size})."
        return parameters
