"""The cluster's own check of a request before it enters the approval queue.

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

from claims import cluster_ops, services, state_messages, validation
from claims.device_picker import Picks
from claims.kube.errors import KubeError, PermanentKubeError
from claims.kube.manifests import namespace_manifest
from claims.models import ClaimRequest, Cluster, NamespaceRequest

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
        cluster_ops.gateway_for(cluster).create(manifest, dry_run=True)
    except PermanentKubeError as error:
        if error.status in REFUSED:
            raise
        return _note(cluster, error)
    except KubeError as error:
        return _note(cluster, error)
    return ""


def _note(cluster: Cluster, error: KubeError) -> str:
    return state_messages.DRY_RUN_NOT_ASKED % {"cluster": cluster, "reason": error.message}


def namespace_request_submit(
    *, user: Any, cluster: Cluster, name: str, purpose: str = ""
) -> NamespaceRequest:
    """services.namespace_request_submit, after the cluster's dry-run of the Namespace."""
    name = (name or "").strip()
    validation.validate_namespace_name(name)
    labels = NamespaceRequest(name=name).labels() | {"gpu-portal.io/namespace-request": ""}
    note = _checked(cluster, namespace_manifest(name=name, labels=labels), "name")
    return services.namespace_request_submit(
        user=user, cluster=cluster, name=name, purpose=purpose, dry_run_note=note
    )


def claim_request_submit(**fields: Any) -> ClaimRequest:
    """services.claim_request_submit, after the cluster's dry-run of the ResourceClaim (the
    same field checks first: bad input is explained by the portal, not sent)."""
    claim = unsaved_claim(fields)
    cluster = claim.namespace_request.cluster
    picks = Picks(claim.gpu_model, claim.min_memory, claim.mig_profile)
    written = claim.selector
    claim.selector = validation.claim_selector(
        cluster=cluster, device_class=claim.device_class, picks=picks, selector=written
    )
    validation.validate_claim_fields(
        cluster=cluster,
        name=claim.name,
        device_class=claim.device_class,
        count=claim.count,
        all_devices=claim.all_devices,
        selector=claim.selector,
        picks=picks,
        written=written,
    )
    selector_field = validation.selector_field_of(picks, written)
    manifest = claim_manifest(claim)
    stand_in = manifest["metadata"]["namespace"] != claim.namespace_request.name
    note = _checked(cluster, manifest, selector_field, stand_in=stand_in)
    return services.claim_request_submit(**fields, dry_run_note=note)


def unsaved_claim(fields: dict[str, Any]) -> ClaimRequest:
    all_devices = bool(fields.get("all_devices"))
    return ClaimRequest(
        namespace_request=fields["namespace_request"],
        name=(fields.get("name") or "").strip(),
        device_class=fields.get("device_class") or "",
        count=None if all_devices else fields.get("count", 1),
        all_devices=all_devices,
        selector=(fields.get("selector") or "").strip(),
        gpu_model=(fields.get("gpu_model") or "").strip(),
        min_memory=(fields.get("min_memory") or "").strip(),
        mig_profile=(fields.get("mig_profile") or "").strip(),
    )


def claim_manifest(claim: ClaimRequest) -> dict[str, Any]:
    """The ResourceClaim as it will be applied, in the namespace it can be checked in."""
    ns = claim.namespace_request
    manifest = cluster_ops.planned_claim_manifest(claim)
    # No id before it is saved; the label's value must still be a valid one.
    manifest["metadata"]["labels"]["gpu-portal.io/claim-request"] = ""
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
        message = _("%(cluster)s refuses it: %(reason)s") % {
            "cluster": cluster,
            "reason": refused.message,
        }
        field = _field_of(refused.details, selector_field)
        raise ValidationError({field: [message]}) from None


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
