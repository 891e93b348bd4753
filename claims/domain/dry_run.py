"""The cluster's own check of a request before it enters the approval queue: a step of
the one submit (claims.domain.services), asked for by the pages and the API.

Every manifest the request will apply is sent once with `dryRun=All`: the API server decodes,
defaults, validates and admits it, answers with the object it would store, and stores nothing.
A refusal becomes a field error in the server's words and nothing is saved. A cluster that
cannot be asked (unreachable, no rights to check, DRA not served) does not hold the request
back, since the database is the source of truth: it is accepted with a note for the approver.

A claim whose namespace is not on the cluster yet (its request still pending) is checked in
`default`: a ResourceClaim's validation does not depend on its namespace, and the namespace
cannot be dry-run into existence for it. A claim of the same name in `default` says nothing
about the claim's own namespace, so AlreadyExists there is no refusal.

A cluster the portal already knows to be unreachable is not asked at all: a submit would
otherwise wait for the connection's timeouts (some 16 s) only to add the same note.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from claims.clusters import gateways
from claims.domain import state_messages
from claims.kube import labels as label_keys
from claims.kube.errors import KubeError, PermanentKubeError
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.read import planned

# Statuses that mean "the server refuses this object" rather than "could not check".
REFUSED = (400, 409, 422)
STAND_IN_NAMESPACE = "default"


def check(cluster: Cluster, manifest: dict[str, Any]) -> str:
    """Empty when the server would accept the manifest; a note when it could not be asked.
    Raises the PermanentKubeError, with the server's words, when it refuses."""
    if cluster.unreachable_since:
        since = cluster.unreachable_since.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return state_messages.DRY_RUN_UNREACHABLE % {"cluster": cluster, "since": since}
    try:
        gateways.gateway_for(cluster).create(manifest, dry_run=True)
    except PermanentKubeError as error:
        if error.status in REFUSED:
            raise
        return _note(cluster, error)
    except KubeError as error:
        return _note(cluster, error)
    return ""


def _note(cluster: Cluster, error: KubeError) -> str:
    return state_messages.DRY_RUN_NOT_ASKED % {"cluster": cluster, "reason": error.message}


def namespace_note(cluster: Cluster, name: str) -> str:
    """The cluster's dry-run of the Namespace a request will create: a note when it could not
    be asked; a refusal raises ValidationError on the name."""
    labels = NamespaceRequest(name=name).labels() | {label_keys.NAMESPACE_REQUEST: ""}
    return _checked(cluster, planned.namespace_manifest(name, labels), "name")


def claim_note(claim: ClaimRequest, *, selector_field: str) -> str:
    """The cluster's dry-run of an unsaved claim's ResourceClaim (its fields checked by the
    portal first: bad input is explained by the portal, not sent)."""
    manifest = claim_manifest(claim)
    stand_in = manifest["metadata"]["namespace"] != claim.namespace_request.name
    return _checked(claim.namespace_request.cluster, manifest, selector_field, stand_in=stand_in)


def claim_manifest(claim: ClaimRequest) -> dict[str, Any]:
    """The ResourceClaim as it will be applied, in the namespace it can be checked in."""
    ns = claim.namespace_request
    manifest = planned.planned_claim_manifest(claim)
    # No id before it is saved; the label's value must still be a valid one.
    manifest["metadata"]["labels"][label_keys.CLAIM_REQUEST] = ""
    if not (ns.kube_uid and ns.state == NamespaceRequest.State.ACTIVE):
        manifest["metadata"]["namespace"] = STAND_IN_NAMESPACE
    return manifest


def _checked(
    cluster: Cluster, manifest: dict[str, Any], selector_field: str, *, stand_in: bool = False
) -> str:
    try:
        return check(cluster, manifest)
    except PermanentKubeError as refused:
        if stand_in and refused.reason == "AlreadyExists":
            return ""  # someone else's claim in `default`: the server accepted the rest
        if refused.reason == "AlreadyExists":
            raise ValidationError({"name": [_name_taken(cluster, manifest)]}) from None
        message = _("%(cluster)s refuses it: %(reason)s") % {
            "cluster": cluster,
            "reason": refused.message,
        }
        field = _field_of(refused.details, selector_field)
        raise ValidationError({field: [message]}) from None


def _name_taken(cluster: Cluster, manifest: dict[str, Any]) -> str:
    """The server's AlreadyExists, said for the name field."""
    metadata = manifest["metadata"]
    if manifest["kind"] == "Namespace":
        return _(
            "A namespace named %(name)s already exists on %(cluster)s; choose another name."
        ) % {"name": metadata["name"], "cluster": cluster}
    return _(
        "A claim named %(name)s already exists in namespace %(namespace)s; choose another name."
    ) % {"name": metadata["name"], "namespace": metadata["namespace"]}


def _field_of(details: dict[str, Any], selector_field: str) -> str:
    """The form field a refusal is about, from the Status causes' field paths."""
    paths = [str(cause.get("field") or "") for cause in details.get("causes") or []]
    for path in paths:
        if ".selectors" in path:
            return selector_field
        if path.endswith(".count"):
            return "count"
        if path.endswith(".deviceClassName"):
            return "device_class"
    return "name"
