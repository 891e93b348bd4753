# The REST API (issue #4) fills this in.
urlpatterns: list = []
