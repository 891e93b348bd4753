"""The manifests the portal applies for a request row, as pages show them before and after."""

from __future__ import annotations

from django.conf import settings

from claims.kube import labels as label_keys
from claims.kube import manifests
from claims.models import ClaimRequest


def pod_security_labels() -> dict[str, str]:
    """The Pod Security level an admin sets for the portal's namespaces (enforced, and warned
    of to kubectl users), none when NAMESPACE_POD_SECURITY is empty."""
    level = settings.NAMESPACE_POD_SECURITY
    if not level:
        return {}
    return {label_keys.POD_SECURITY_ENFORCE: level, label_keys.POD_SECURITY_WARN: level}


def namespace_manifest(name: str, labels: dict[str, str]) -> dict:
    """A namespace the portal creates: its own labels, and Pod Security's."""
    return manifests.namespace_manifest(name=name, labels=labels | pod_security_labels())


def claim_manifest(claim: ClaimRequest, api_version: str) -> dict:
    return manifests.resource_claim_manifest(
        api_version=api_version,
        namespace=claim.namespace,
        name=claim.name,
        device_class=claim.device_class,
        count=claim.count,
        all_devices=claim.all_devices,
        selector=claim.selector,
        labels=claim.labels(),
    )


def planned_claim_manifest(claim: ClaimRequest) -> dict:
    """The ResourceClaim as the portal applies it, in the version last discovered (for pages)."""
    return claim_manifest(claim, claim.cluster.preferred_resource_version or "v1")
