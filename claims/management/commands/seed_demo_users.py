"""Create the demo logins: an approver and a data scientist (passwords from the environment)."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand

from claims.read.selectors import APPROVERS_GROUP

DEMO_USERS = (
    # username, password variable, default password, approver
    ("admin", "DEMO_ADMIN_PASSWORD", "admin", True),
    ("alice", "DEMO_ALICE_PASSWORD", "alice", False),
)


def ensure_user(username: str, password: str, *, approver: bool) -> bool:
    """Create the user if missing; True when created. An existing password is left alone."""
    user, created = User.objects.get_or_create(
        username=username, defaults={"email": f"{username}@example.org"}
    )
    if created:
        user.set_password(password)
        user.is_staff = user.is_superuser = approver
        user.save()
    if approver:
        group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
        user.groups.add(group)
    return created


class Command(BaseCommand):
    help = "Create the demo logins (admin: approver, alice: data scientist) and print them."

    def handle(self, *args: Any, **options: Any) -> None:
        for username, variable, default, approver in DEMO_USERS:
            password = os.getenv(variable, default)
            created = ensure_user(username, password, approver=approver)
            role = "approver" if approver else "data scientist"
            shown = password if created else "(unchanged)"
            self.stdout.write(f"  {role:15} login: {username:6} password: {shown}")
