"""The claims in use, idle first, for approvers and admins: the ones warned by their team's
idle reclaim policy (soonest deadline first), then by their GPUs' activity now, lowest first;
the ones without metrics last, with why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from claims.models import ClaimRequest, IdleWarning
from claims.read import claim_devices, utilisation


@dataclass
class InUse:
    claim: ClaimRequest
    activity: float | None  # now, averaged over its GPUs; None: no data
    warning: IdleWarning | None

    @property
    def idle(self) -> bool:
        return self.activity is not None and self.activity <= settings.UTILISATION_IDLE_THRESHOLD

    def order(self) -> tuple[int, float, datetime | None]:
        if self.warning is not None:
            return (0, self.warning.deadline.timestamp(), None)
        if self.activity is None:
            return (2, 0.0, self.claim.applied_at)
        return (1, self.activity, None)


def claims_idle_first(user: Any) -> tuple[list[InUse], str]:
    """(the rows, why there is no activity) for an approver; the caller checks who asks."""
    claims = list(
        ClaimRequest.objects.filter(state=ClaimRequest.State.IN_USE).select_related(
            "owner", "namespace_request__cluster"
        )
    )
    warnings = {
        w.claim_id: w
        for w in IdleWarning.objects.filter(
            state=IdleWarning.State.OPEN, claim__in=[claim.pk for claim in claims]
        )
    }
    # Each cluster's GPUs from its own Prometheus and series (claims/read/metrics_scope.py).
    clusters = {
        claim.namespace_request.cluster_id: claim.namespace_request.cluster for claim in claims
    }
    seen = {pk: utilisation.devices_usage(cluster) for pk, cluster in clusters.items()}
    no_data = "; ".join(sorted({answer for answer in seen.values() if isinstance(answer, str)}))
    by_claim: dict[tuple[int, str, str], list[float]] = {}
    by_uuid: dict[str, float] = {}
    for pk, answer in seen.items():
        for device in answer.values() if not isinstance(answer, str) else []:
            by_uuid[device.uuid] = device.activity
            for namespace, name in device.claims:
                by_claim.setdefault((pk, namespace, name), []).append(device.activity)
    rows = []
    for claim in claims:
        held = claim_devices.held(claim)
        if held.joined:  # by its GPUs, whether or not a Pod uses them
            found = [by_uuid[uuid] for uuid in held.uuids if uuid in by_uuid]
            values = found if len(found) == len(held.uuids) else None
        else:
            key = (claim.namespace_request.cluster_id, claim.namespace_request.name, claim.name)
            values = by_claim.get(key)
        activity = sum(values) / len(values) if values else None
        rows.append(InUse(claim, activity, warnings.get(claim.pk)))
    rows.sort(key=lambda row: row.order()[:2])
    return rows, no_data
