"""Who may call what in the REST API: the same rules as the pages."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from claims.read import selectors


class IsApprover(BasePermission):
    """Approvers (the group, or staff) and team approvers may approve and reject; the services
    check each decision again (a team approver decides only their teams' requests)."""

    message = "Only approvers can approve or reject requests."

    def has_permission(self, request: Request, view: Any) -> bool:
        return selectors.user_may_decide(request.user)
