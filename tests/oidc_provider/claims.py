"""What the test provider says about a user: the standard claims and a `groups` scope."""

from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims: dict[str, Any], user: Any) -> dict[str, Any]:
    claims["preferred_username"] = user.username
    claims["given_name"] = user.first_name
    claims["family_name"] = user.last_name
    claims["email"] = user.email
    claims["email_verified"] = True
    claims.update(settings.EXTRA_CLAIMS.get(user.username, {}))
    return claims


class GroupsScopeClaims(ScopeClaims):  # type: ignore[misc]
    info_groups = (_("Groups"), _("The groups you belong to."))

    def scope_groups(self) -> dict[str, Any]:
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
