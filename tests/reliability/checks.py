"""What every fault test asserts: nothing lost, nothing twice, one transition each."""

from __future__ import annotations

from collections import Counter

from django.contrib.auth.models import User

import kubesim
from claims.domain import services
from claims.models import AuditEvent, ClaimRequest, Cluster, NamespaceRequest

GPU = "gpu.nvidia.com"
APPLIED = ClaimRequest.State.WAITING  # a ResourceClaim made, waiting for a Pod to use it


def pending_claims(owner: User, cluster: Cluster, namespace: str, count: int) -> list[ClaimRequest]:
    ns = services.namespace_request_submit(user=owner, cluster=cluster, name=namespace)
    return [
        services.claim_request_submit(
            user=owner, namespace_request=ns, name=f"c{i}", device_class=GPU
        )
        for i in range(count)
    ]


def approve_all(approver: User, claims: list[ClaimRequest]) -> None:
    for claim in claims:
        services.claim_request_approve(user=approver, claim_request=claim)


def applied(claims: list[ClaimRequest]) -> int:
    pks = [claim.pk for claim in claims]
    return ClaimRequest.objects.filter(pk__in=pks, state=APPLIED).count()


def transitions_to(claims: list[ClaimRequest], state: str) -> Counter[int]:
    """How often each claim entered `state`, by its audit rows."""
    rows = AuditEvent.objects.filter(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST,
        object_id__in=[claim.pk for claim in claims],
        to_state=state,
    ).exclude(from_state=state)
    return Counter(rows.values_list("object_id", flat=True))


def resource_claims(handle: kubesim.Handle, namespace: str) -> list[dict]:
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    return handle.admin("GET", path)["items"]


def check_each_applied_once(handle: kubesim.Handle, claims: list[ClaimRequest]) -> str:
    """Assert the cluster holds exactly one ResourceClaim per claim, the one each recorded,
    and each claim was approved once and applied once; the figure to report."""
    namespace = claims[0].namespace
    found = resource_claims(handle, namespace)
    names = Counter(obj["metadata"]["name"] for obj in found)
    duplicates = sum(count - 1 for count in names.values())
    uids = {obj["metadata"]["name"]: obj["metadata"]["uid"] for obj in found}
    recorded = dict(
        ClaimRequest.objects.filter(pk__in=[c.pk for c in claims]).values_list("name", "kube_uid")
    )
    assert sorted(names) == sorted(claim.name for claim in claims)
    assert duplicates == 0
    assert recorded == uids
    approved, applied_once = transitions_to(claims, "approved"), transitions_to(claims, APPLIED)
    assert set(approved.values()) == {1} and len(approved) == len(claims)
    assert set(applied_once.values()) == {1} and len(applied_once) == len(claims), history(claims)
    assert not NamespaceRequest.objects.filter(state="failed").exists()
    total = len(claims)
    return (
        f"{applied(claims)}/{total} applied, {len(found)} ResourceClaims, {duplicates} duplicates, "
        f"1 approved and 1 applied transition each"
    )


def history(claims: list[ClaimRequest]) -> list[tuple]:
    rows = AuditEvent.objects.filter(
        object_kind=AuditEvent.Kind.CLAIM_REQUEST, object_id__in=[claim.pk for claim in claims]
    ).order_by("object_id", "pk")
    return list(rows.values_list("object_id", "from_state", "to_state", "message"))
