import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from portal import startup_heap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

application = get_wsgi_application()
# Every view imported now rather than at its first request, so it is set aside with the rest.
views = get_resolver().url_patterns
startup_heap.set_aside()
