"""What every API view shares: authentication, throttling, paging, filtering, scoping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.filters import OrderingFilter
from rest_framework.generics import GenericAPIView
from rest_framework.metadata import SimpleMetadata
from rest_framework.pagination import BasePagination
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from claims.api.pagination import ListPagination
from claims.api.parsers import BoundedJSONParser, check_body_size
from claims.api.schema import ApiSchema
from claims.api.throttling import AnonThrottle, UserThrottle


class NoActionsMetadata(SimpleMetadata):
    """OPTIONS answers with the basics; the schema at /api/schema/ describes the inputs."""

    def determine_actions(self, request: Request, view: APIView) -> dict:
        return {}


class ApiView(GenericAPIView):
    """Set here rather than only in REST_FRAMEWORK, so the API never depends on defaults."""

    # REST_FRAMEWORK's (portal/api_settings.py): knox's tokens, failures counted by the login
    # lockout, then the session.
    authentication_classes = api_settings.DEFAULT_AUTHENTICATION_CLASSES  # type: ignore[assignment]
    permission_classes = [IsAuthenticated]
    throttle_classes = [UserThrottle, AnonThrottle]
    pagination_class: type[BasePagination] | None = ListPagination
    parser_classes: list[type[BaseParser]] = [BoundedJSONParser, FormParser, MultiPartParser]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    schema = ApiSchema()
    metadata_class = NoActionsMetadata
    ordering_fields = ["created", "updated", "name", "state"]
    # The model and the permission-scoped selector of list views.
    model: type[Model]
    list_selector: Callable[..., QuerySet]

    def initial(self, request: Request, *args: object, **kwargs: object) -> None:
        # First: authentication may read a form body already.
        check_body_size(request)
        super().initial(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return self.model._default_manager.none()
        return type(self).list_selector(user=self.request.user)

    def list_response(
        self,
        output: type[Serializer],
        prepare: Callable[[list[Any]], dict[str, Any]] | None = None,
    ) -> Response:
        """A page of rows; `prepare` reads what the page needs once, for the serializer."""
        queryset = self.filter_queryset(self.get_queryset())
        page = list(self.paginate_queryset(queryset) or [])
        context = prepare(page) if prepare else {}
        return self.get_paginated_response(output(page, many=True, context=context).data)


@csrf_exempt
def not_found(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"detail": gettext("No such API endpoint or object.")}, status=404)
