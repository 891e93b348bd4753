"""Settings of single sign-on with OpenID Connect (portal/oidc.py); off while no client id
is set. portal/settings.py adds its authentication backend."""

import os

from portal.env import envbool, envlist

OIDC_RP_CLIENT_ID = os.getenv("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.getenv("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = os.getenv("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.getenv("OIDC_RP_SCOPES", "openid email profile")
OIDC_OP_ISSUER = os.getenv("OIDC_OP_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.getenv("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.getenv("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.getenv("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.getenv("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_PROVIDER_NAME = os.getenv("OIDC_PROVIDER_NAME", "single sign-on")
# The claim that names the user: their portal username and so their cluster identity
# ("<ACCESS_USER_PREFIX><value>"), e.g. preferred_username or email.
OIDC_USERNAME_CLAIM = os.getenv("OIDC_USERNAME_CLAIM", "preferred_username")
# The claim listing the user's groups, and which of them make an approver or an admin.
OIDC_GROUPS_CLAIM = os.getenv("OIDC_GROUPS_CLAIM", "groups")
OIDC_APPROVER_GROUPS = envlist("OIDC_APPROVER_GROUPS", "")
OIDC_ADMIN_GROUPS = envlist("OIDC_ADMIN_GROUPS", "")
# Who may sign in: members of these groups (or of the two above); empty: anyone the provider
# signs in.
OIDC_USER_GROUPS = envlist("OIDC_USER_GROUPS", "")
# A local account of the same username becomes the SSO account at its first sign-in (off: it
# is refused unless an administrator put it in the "single sign-on" group).
OIDC_LINK_LOCAL_ACCOUNTS = envbool("OIDC_LINK_LOCAL_ACCOUNTS", "False")
OIDC_TIMEOUT = float(os.getenv("OIDC_TIMEOUT_SECONDS", "10"))
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
