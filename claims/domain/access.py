"""Access to an active namespace for the person who asked for it.

When a namespace becomes active the portal binds its owner to ACCESS_CLUSTER_ROLE there
twice over: as their own cluster identity (User "<ACCESS_USER_PREFIX><username>", for
clusters whose users sign in with OIDC or certificates), and through a ServiceAccount of
their own, whose short-lived token (TokenRequest) goes into a kubeconfig they download from
the namespace page, for clusters whose users have no identity of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import yaml
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.utils.translation import gettext as _

from claims.clusters.gateways import gateway_for
from claims.domain import observations, state_messages
from claims.domain.transitions import record_event
from claims.kube import manifests, names
from claims.kube.ownership import create_or_adopt
from claims.models import AuditEvent, NamespaceRequest

RBAC_GROUP = "rbac.authorization.k8s.io"


def cluster_username(username: str) -> str:
    """The name the cluster knows a portal user by (the API server's username prefix)."""
    return f"{settings.ACCESS_USER_PREFIX}{username}"


def _subjects(ns: NamespaceRequest, service_account: str) -> list[dict[str, str]]:
    subjects = [{"kind": "ServiceAccount", "name": service_account, "namespace": ns.name}]
    if settings.ACCESS_GRANT_USER:
        user = cluster_username(ns.owner.get_username())
        subjects.append({"kind": "User", "apiGroup": RBAC_GROUP, "name": user})
    return subjects


def grant_access(ns: NamespaceRequest) -> None:
    """The owner's ServiceAccount and RoleBinding in their namespace (idempotent)."""
    if ns.state != NamespaceRequest.State.ACTIVE or ns.access_granted_at:
        return
    gateway = gateway_for(ns.cluster)
    username = ns.owner.get_username()
    service_account = names.access_service_account_name(username)
    labels = ns.labels()
    create_or_adopt(
        gateway,
        manifests.service_account_manifest(namespace=ns.name, name=service_account, labels=labels),
    )
    create_or_adopt(
        gateway,
        manifests.role_binding_manifest(
            namespace=ns.name,
            name=names.access_role_binding_name(username),
            cluster_role=settings.ACCESS_CLUSTER_ROLE,
            subjects=_subjects(ns, service_account),
            labels=labels,
        ),
    )
    observations.namespace_access_granted(namespace_request=ns)


@dataclass(frozen=True)
class Kubeconfig:
    filename: str
    text: str
    expires_at: datetime


def issue_kubeconfig(
    *, user: AbstractBaseUser | AnonymousUser, namespace_request: NamespaceRequest
) -> Kubeconfig:
    """A kubeconfig for the owner's ServiceAccount in their namespace, with a fresh token."""
    ns = namespace_request
    if not user.is_authenticated or user.pk != ns.owner_id:
        raise PermissionDenied(_("Only the namespace's owner can download its kubeconfig."))
    if ns.state != NamespaceRequest.State.ACTIVE or not ns.access_granted_at:
        raise ValidationError(
            {
                NON_FIELD_ERRORS: [
                    _("Namespace %(name)s is not ready for kubectl yet.") % {"name": ns.name}
                ]
            }
        )
    gateway = gateway_for(ns.cluster)
    username = ns.owner.get_username()
    token, expires_at = gateway.request_token(
        ns.name,
        names.access_service_account_name(username),
        expiration_seconds=settings.ACCESS_TOKEN_SECONDS,
    )
    config = gateway.kubeconfig_for(
        token=token,
        namespace=ns.name,
        cluster_name=names.label(ns.cluster.name),
        user_name=f"{names.user_slug(username)}-{ns.name}",
    )
    ends = f"{expires_at:%Y-%m-%d %H:%M} UTC"
    message = state_messages.KUBECONFIG_ISSUED % {"ends": ends}
    record_event(ns, message, user, action=AuditEvent.Action.KUBECONFIG_ISSUED)
    text = yaml.safe_dump(config, sort_keys=False)
    return Kubeconfig(kubeconfig_filename(ns), text, expires_at)


def kubeconfig_filename(ns: NamespaceRequest) -> str:
    return f"{ns.cluster.name}-{ns.name}.kubeconfig"
