"""A real OpenID Connect provider for the SSO tests: django-oidc-provider in a Django project of
its own, run in a subprocess on loopback (fixture.py)."""
