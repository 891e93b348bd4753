import json
import os

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from oidc_provider.views import JwksView


def jwks_without_kid(request: HttpRequest) -> JsonResponse:
    """The keys with no `kid`, as a small provider may publish them (it is optional)."""
    keys = json.loads(JwksView().get(request).content)["keys"]
    return JsonResponse({"keys": [{k: v for k, v in key.items() if k != "kid"} for key in keys]})


NO_KID = [path("openid/jwks", jwks_without_kid)] if os.environ.get("OIDC_PROVIDER_NO_KID") else []
urlpatterns = [
    *NO_KID,
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
]
