"""The language switcher in the header: Django's set_language (the cookie, back to the page),
and for a signed-in user the choice saved in their profile, so it follows them to every
device and survives logging out."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST
from django.views.i18n import LANGUAGE_QUERY_PARAMETER
from django.views.i18n import set_language as django_set_language

from claims.models import Profile
from claims.web import middleware


@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    response = django_set_language(request)
    code = middleware.supported(request.POST.get(LANGUAGE_QUERY_PARAMETER, ""))
    if code and request.user.is_authenticated:
        Profile.objects.update_or_create(user_id=request.user.pk, defaults={"language": code})
        middleware.remember(request, code)
    return response
