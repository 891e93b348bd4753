"""What the API shows of namespace and claim requests: owner, state, decision, feasibility."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from claims.api import examples
from claims.api.serializers.common import _example, _time
from claims.models import ClaimRequest, NamespaceRequest
from claims.policy import feasibility
from claims.read import planned, queue, selectors


class DecidedRequestOutput(serializers.ModelSerializer):
    """What namespace and claim requests share: an owner, a state, an approver's decision."""

    owner = serializers.CharField(source="owner.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True)

    DECISION_FIELDS = ["state", "state_message", "owner", "decided_by", "decided_at"]


@extend_schema_serializer(examples=_example("A pending namespace", examples.NAMESPACE_REQUEST))
class NamespaceRequestOutput(DecidedRequestOutput):
    cluster_name = serializers.CharField(source="cluster.name")
    access_granted_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When the owner's access (ServiceAccount, RoleBinding) was set up in the "
        "active namespace; from then on POST .../kubeconfig/ answers a kubeconfig.",
    )

    class Meta:
        model = NamespaceRequest
        fields = [
            "id",
            "cluster",
            "cluster_name",
            "name",
            "purpose",
            "dry_run_note",
            *DecidedRequestOutput.DECISION_FIELDS,
            "access_granted_at",
            "created",
            "updated",
        ]

    def to_representation(self, instance: NamespaceRequest) -> dict[str, Any]:
        """DRF's field-by-field walk, built directly (as ClaimRequestOutput)."""
        ns = instance
        return {
            "id": ns.pk,
            "cluster": ns.cluster_id,
            "cluster_name": ns.cluster.name,
            "name": ns.name,
            "purpose": ns.purpose,
            "dry_run_note": ns.dry_run_note,
            "state": ns.state,
            "state_message": ns.state_message,
            "owner": ns.owner.username,
            "decided_by": ns.decided_by.username if ns.decided_by else None,
            "decided_at": _time(ns.decided_at),
            "access_granted_at": _time(ns.access_granted_at),
            "created": _time(ns.created),
            "updated": _time(ns.updated),
        }


class FeasibilityOutput(serializers.Serializer):
    possible = serializers.BooleanField(
        allow_null=True,
        help_text="Some node can give this many, ever; null when the selector cannot be "
        "checked before the cluster tries it (selector_evaluated is false).",
    )
    matching = serializers.IntegerField(
        help_text="Devices of the class the selector matches; a device it fails to evaluate "
        "on is never counted."
    )
    max_on_one_node = serializers.IntegerField()
    free_now_on_one_node = serializers.IntegerField()
    free_now_in_cluster = serializers.IntegerField()
    node = serializers.CharField(help_text="The node with the most free now.")
    held_outside_portal = serializers.IntegerField(
        help_text="Matching devices held by claims made outside the portal (not free)."
    )
    tainted = serializers.IntegerField(
        help_text="Matching devices with a NoSchedule or NoExecute device taint (not free: "
        "the portal's claims tolerate no taint)."
    )
    selector_evaluated = serializers.BooleanField(
        help_text="False when the selector fails to evaluate on some device of the class (an "
        "attribute it does not publish, a comparison CEL cannot make): the scheduler stops "
        "the allocation on such a device with a CEL runtime error, so nothing is promised."
    )
    summary = serializers.CharField()


class AlternativeOutput(serializers.Serializer):
    name = serializers.CharField(help_text="Its subrequest's name, e.g. a100 (gpu/a100).")
    device_class = serializers.CharField()
    gpu_model = serializers.CharField()
    min_memory = serializers.CharField()
    mig_profile = serializers.CharField()
    count = serializers.IntegerField(allow_null=True)
    all_devices = serializers.BooleanField()
    selector = serializers.CharField(help_text="The CEL its picks and the claim's own make.")


ALTERNATIVE_OUTPUT_FIELDS = tuple(AlternativeOutput().fields)


def alternatives_of(claim: ClaimRequest) -> list[dict[str, Any]]:
    names = [planned_alternative.name for planned_alternative in planned.claim_alternatives(claim)]
    return [
        {field: ({"name": name} | alt).get(field) for field in ALTERNATIVE_OUTPUT_FIELDS}
        for name, alt in zip(names, claim.alternatives(), strict=True)
    ]


class QueueOutput(serializers.Serializer):
    position = serializers.IntegerField(help_text="1 for the next claim to get its devices.")
    of = serializers.IntegerField(help_text="How many claims wait for the same devices.")
    waiting_for = serializers.CharField(
        help_text="What they wait for: the device class, and the GPU model when named."
    )
    reason = serializers.CharField(help_text="Why it waits, in the scheduler's words if any.")
    estimate = serializers.CharField(
        help_text="By when at the latest, from the holders' expiry times; `unknown` when "
        "nothing is known (never a guess)."
    )
    estimate_at = serializers.DateTimeField(
        allow_null=True, help_text="The estimate's time; null when unknown."
    )


@extend_schema_serializer(examples=_example("A claim in use", examples.CLAIM_REQUEST))
class ClaimRequestOutput(DecidedRequestOutput):
    cluster = serializers.IntegerField(source="namespace_request.cluster_id")
    cluster_name = serializers.CharField(source="namespace_request.cluster.name")
    namespace = serializers.CharField(source="namespace_request.name")
    allocation = serializers.JSONField(
        allow_null=True,
        help_text="The devices DRA allocated while a Pod uses the claim; null when none does.",
    )
    feasibility = serializers.SerializerMethodField(
        help_text="While pending: can one node ever give this many devices of the class (and "
        "selector), and how many are free now (allocated to no claim, the portal's or "
        "another's); "
        "null once decided.",
    )
    lifetime_seconds = serializers.SerializerMethodField(
        help_text="How long the claim lives from its creation in the cluster (extensions "
        "included); null before that. It is released by the portal at `expires_at`.",
    )
    alternatives = serializers.SerializerMethodField(
        help_text="DRA's prioritized list, in order: the claim's own device fields first. "
        "One entry for a claim without alternatives.",
    )
    allocated_alternative = serializers.CharField(
        help_text="Which alternative the cluster allocated, as the allocation names it "
        "(`gpu/a100`); empty while unallocated or for a claim with one alternative.",
    )
    queue = serializers.SerializerMethodField(
        help_text="While it waits for devices: its place among the claims waiting for the same "
        "devices; null otherwise.",
    )

    class Meta:
        model = ClaimRequest
        fields = [
            "id",
            "cluster",
            "cluster_name",
            "namespace_request",
            "namespace",
            "name",
            "device_class",
            "count",
            "all_devices",
            "selector",
            "gpu_model",
            "min_memory",
            "mig_profile",
            "alternatives",
            "dry_run_note",
            "purpose",
            *DecidedRequestOutput.DECISION_FIELDS,
            "applied_api_version",
            "applied_at",
            "node",
            "allocation",
            "allocated_alternative",
            "queue",
            "feasibility",
            "lifetime_seconds",
            "expires_at",
            "created",
            "updated",
        ]

    TIMES = ("decided_at", "applied_at", "expires_at", "created", "updated")

    def to_representation(self, instance: ClaimRequest) -> dict[str, Any]:
        """What DRF's field-by-field walk gives, built directly: a page of 1,000 claims took
        most of its time there. The fields above still describe it for the schema, and a test
        keeps the two the same."""
        claim = instance
        names = _names_of(claim)
        times = {name: _time(getattr(claim, name)) for name in self.TIMES}
        return {
            "id": claim.pk,
            "cluster": names["row_cluster_id"],
            "cluster_name": names["row_cluster_name"],
            "namespace_request": claim.namespace_request_id,
            "namespace": names["row_namespace"],
            "name": claim.name,
            "device_class": claim.device_class,
            "count": claim.count,
            "all_devices": claim.all_devices,
            "selector": claim.selector,
            "gpu_model": claim.gpu_model,
            "min_memory": claim.min_memory,
            "mig_profile": claim.mig_profile,
            "alternatives": alternatives_of(claim),
            "dry_run_note": claim.dry_run_note,
            "purpose": claim.purpose,
            "state": claim.state,
            "state_message": claim.state_message,
            "owner": names["row_owner"],
            "decided_by": names["row_decided_by"],
            "decided_at": times["decided_at"],
            "applied_api_version": claim.applied_api_version,
            "applied_at": times["applied_at"],
            "node": claim.node,
            "allocation": claim.allocation,
            "allocated_alternative": claim.allocated_alternative,
            "queue": self.get_queue(claim),
            "feasibility": self.get_feasibility(claim),
            "lifetime_seconds": self.get_lifetime_seconds(claim),
            "expires_at": times["expires_at"],
            "created": times["created"],
            "updated": times["updated"],
        }

    @extend_schema_field(AlternativeOutput(many=True))
    def get_alternatives(self, claim: ClaimRequest) -> list[dict[str, Any]]:
        return alternatives_of(claim)

    @extend_schema_field(QueueOutput(allow_null=True))
    def get_queue(self, claim: ClaimRequest) -> dict[str, Any] | None:
        if claim.state not in queue.UNALLOCATED or claim.allocation:
            return None
        # One read of a cluster's queue for a whole page of claims.
        context = cast(dict[str, Any], self.context)
        cluster_id = claim.namespace_request.cluster_id
        queues = context.setdefault("queues_by_cluster", {})
        if cluster_id not in queues:
            queues[cluster_id] = queue.queue_of(claim.namespace_request.cluster)
        spot = queues[cluster_id].get(claim.pk)
        if spot is None:
            return None
        found = spot.as_dict()
        found["estimate_at"] = _time(spot.estimate.at)
        return found

    def get_lifetime_seconds(self, claim: ClaimRequest) -> int | None:
        return int(claim.lifetime.total_seconds()) if claim.lifetime else None

    @extend_schema_field(FeasibilityOutput(allow_null=True))
    def get_feasibility(self, claim: ClaimRequest) -> dict[str, Any] | None:
        if claim.state != ClaimRequest.State.PENDING:
            return None
        # One read of the allocations per cluster for a whole page of claims.
        context = cast(dict[str, Any], self.context)
        taken = context.setdefault("allocated_by_cluster", {})
        known = context.setdefault("feasibility_known", {})
        return feasibility.of_claim(claim, taken, known).as_dict()


def _names_of(claim: ClaimRequest) -> dict[str, Any]:
    """The names the output shows of the claim's namespace, cluster, owner and approver: as
    columns of a listed row (selectors.claim_request_api_rows), else from the related rows."""
    if hasattr(claim, "row_owner"):
        return {name: getattr(claim, name) for name in selectors.CLAIM_API_NAMES}
    ns = claim.namespace_request
    return {
        "row_cluster_id": ns.cluster_id,
        "row_cluster_name": ns.cluster.name,
        "row_namespace": ns.name,
        "row_owner": claim.owner.username,
        "row_decided_by": claim.decided_by.username if claim.decided_by else None,
    }


def claims_page_context(claims: list[ClaimRequest]) -> dict[str, Any]:
    """What a page of claims needs read once: the namespaces and clusters (with their
    inventories) of the pending ones, and the devices allocated on those clusters."""
    claims = [claim for claim in claims if claim.state == ClaimRequest.State.PENDING]
    if not claims:
        return {}
    related = NamespaceRequest.objects.select_related("cluster")
    namespaces = related.in_bulk({claim.namespace_request_id for claim in claims})
    for claim in claims:
        claim.namespace_request = namespaces[claim.namespace_request_id]
    clusters = {claim.namespace_request.cluster_id for claim in claims}
    return {"allocated_by_cluster": feasibility.allocated_on(clusters)}
