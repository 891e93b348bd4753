"""What every API view shares: authentication, throttling, paging, filtering, scoping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Model, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from knox.auth import TokenAuthentication
from rest_framework.authentication import SessionAuthentication
from rest_framework.filters import OrderingFilter
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from claims.api.pagination import PageNumberPagination
from claims.api.schema import ApiSchema
from claims.api.throttling import AnonThrottle, UserThrottle


class ApiView(GenericAPIView):
    """Set here rather than only in REST_FRAMEWORK, so the API never depends on defaults."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [UserThrottle, AnonThrottle]
    pagination_class = PageNumberPagination
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    schema = ApiSchema()
    ordering_fields = ["created", "updated", "name", "state"]
    # The model and the permission-scoped selector of list views.
    model: type[Model]
    list_selector: Callable[..., QuerySet]

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return self.model._default_manager.none()
        return type(self).list_selector(user=self.request.user)

    def list_response(self, output: type[Serializer]) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(output(page, many=True).data)


def output_data(output: type[Serializer], instance: Any) -> Any:
    return output(instance).data
