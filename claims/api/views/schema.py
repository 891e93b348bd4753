"""The OpenAPI schema and Swagger UI, served from the sidecar package's files (no CDN)."""

from __future__ import annotations

from pathlib import Path

import drf_spectacular_sidecar
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.views.static import serve
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

SWAGGER_UI_DIR = (
    Path(drf_spectacular_sidecar.__file__).parent
    / "static"
    / "drf_spectacular_sidecar"
    / "swagger-ui-dist"
)
ASSET_URL = "/api/docs/assets"


class SchemaApi(SpectacularAPIView):
    permission_classes = [AllowAny]


class SwaggerUi(SpectacularSwaggerView):
    permission_classes = [AllowAny]
    url_name = "api-schema"

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        return f"{ASSET_URL}/{filename}"

    @staticmethod
    def _swagger_ui_favicon() -> str:
        return f"{ASSET_URL}/favicon-32x32.png"


def swagger_ui_asset(request: HttpRequest, filename: str) -> HttpResponseBase:
    """Only the few files Swagger UI needs, straight from the installed package."""
    return serve(request, filename, document_root=str(SWAGGER_UI_DIR))
