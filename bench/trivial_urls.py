"""The project's URLs plus a trivial view: the baseline the idle dashboard poll is held to.

It goes through the same middleware (sessions, authentication, CSRF, ...) as every page and
answers a constant, so the ratio shows what the poll itself costs."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def trivial(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [path("bench/trivial/", trivial), path("", include("portal.urls"))]
