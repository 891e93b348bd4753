"""Set up the test provider's database: `python -m tests.oidc_provider.seed < spec.json`.

The spec names the signing key (PEM), the users (with their groups) and the clients.
"""

import json
import sys
from typing import Any

import django


def seed(spec: dict[str, Any]) -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oidc_provider.models import Client, ResponseType, RSAKey

    call_command("migrate", verbosity=0)
    RSAKey.objects.create(key=spec["key_pem"])
    for person in spec["users"]:
        user = User.objects.create_user(
            person["username"],
            email=person.get("email", ""),
            password=person["password"],
            first_name=person.get("given_name", ""),
            last_name=person.get("family_name", ""),
        )
        for name in person.get("groups", []):
            user.groups.add(Group.objects.get_or_create(name=name)[0])
    code = ResponseType.objects.get(value="code")
    for entry in spec["clients"]:
        client = Client(
            name=entry["client_id"],
            client_type="confidential",
            client_id=entry["client_id"],
            client_secret=entry["client_secret"],
            jwt_alg="RS256",
            require_consent=False,
        )
        client.redirect_uris = entry["redirect_uris"]
        client.save()
        client.response_types.add(code)


if __name__ == "__main__":
    django.setup()
    seed(json.load(sys.stdin))
