"""The manifests the portal applies for a request row, as pages show them before and after."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext as _

from claims.kube import labels as label_keys
from claims.kube import manifests
from claims.kube.names import alternative_names
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
        alternatives=claim_alternatives(claim),
    )


def claim_alternatives(claim: ClaimRequest) -> list[manifests.Alternative]:
    """The claim's prioritized list with the names its subrequests carry (one entry for a
    claim with no further alternatives, which the manifest writes as `exactly`)."""
    wanted = claim.alternatives()
    names = alternative_names(
        [alt.get("gpu_model") or alt.get("mig_profile") or "" for alt in wanted]
    )
    return [
        manifests.Alternative(
            name=name,
            device_class=alt["device_class"],
            count=None if alt.get("all_devices") else alt.get("count"),
            all_devices=bool(alt.get("all_devices")),
            selector=alt.get("selector") or "",
        )
        for name, alt in zip(names, wanted, strict=True)
    ]


def alternative_label(claim: ClaimRequest, position: int) -> str:
    """An alternative as people name it: "alternative 2 (A100-SXM4-40GB)"."""
    alt = claim.alternatives()[position - 1]
    what = alt.get("gpu_model") or alt.get("mig_profile") or alt.get("device_class")
    return _("alternative %(n)d (%(what)s)") % {"n": position, "what": what}


def allocated_alternative_label(claim: ClaimRequest, taken: str) -> str:
    """Which alternative the scheduler took (`taken`, the allocation's `gpu/a100`), in
    words: "gpu/a100: alternative 2 (A100-SXM4-40GB)"; "" when none was."""
    if not taken:
        return ""
    names = [f"{manifests.REQUEST_NAME}/{alt.name}" for alt in claim_alternatives(claim)]
    if taken not in names:
        return taken
    return f"{taken}: {alternative_label(claim, names.index(taken) + 1)}"


def planned_claim_manifest(claim: ClaimRequest) -> dict:
    """The ResourceClaim as the portal applies it, in the version last discovered (for pages)."""
    return claim_manifest(claim, claim.cluster.preferred_resource_version or "v1")
