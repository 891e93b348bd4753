"""The device picker's preview without a claim: the CEL the picker fields make, whether the
cluster can meet it (and what is free now), and what the cluster's devices publish to pick
from. Nothing is saved or sent to the cluster; it reads the inventory of the last sync."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api.errors import call_service
from claims.api.serializers import FeasibilityOutput
from claims.api.views.actions import visible_or_field_error
from claims.api.views.base import ApiView
from claims.api.views.requests import AlternativeInput, AlternativesOrDevice
from claims.clusters import registry as cluster_registry
from claims.models import ClaimRequest, Cluster
from claims.policy import device_picker, feasibility, limits, validation
from claims.policy.device_picker import Picks
from claims.read import selectors

TAG = ["claims"]
PICKER_FIELDS = ("gpu_model", "min_memory", "mig_profile")
COUNT = serializers.IntegerField(min_value=1)


class PreviewInput(AlternativesOrDevice):
    namespace_request = serializers.IntegerField(
        required=False, help_text="Id of your namespace request: its cluster is previewed."
    )
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        required=False,
        help_text="Or a cluster's id; neither is needed while the portal has one cluster.",
    )
    device_class = serializers.CharField(
        required=False,
        max_length=limits.DEVICE_CLASS_MAX_CHARS,
        help_text="e.g. gpu.nvidia.com; required unless `alternatives` are given.",
    )
    count = serializers.IntegerField(required=False, default=1, min_value=1)
    all_devices = serializers.BooleanField(required=False, default=False)
    selector = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=limits.SELECTOR_MAX_BYTES,
        help_text="Optional CEL expression; with picker fields, both must hold.",
    )
    gpu_model = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    min_memory = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=32, help_text="e.g. 40Gi"
    )
    mig_profile = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=64, help_text="e.g. 1g.5gb"
    )
    alternatives = AlternativeInput(
        many=True,
        required=False,
        help_text="As the claim create API's: what would do, in order of preference (at most "
        "8), instead of the flat device fields; each is previewed, `selector` holds for each.",
    )


class OptionsOutput(serializers.Serializer):
    domain = serializers.CharField(help_text="The driver whose attributes the CEL reads.")
    models = serializers.ListField(child=serializers.CharField(), help_text="productName values.")
    memories = serializers.ListField(
        child=serializers.CharField(), help_text="Memory sizes, largest first."
    )
    profiles = serializers.ListField(child=serializers.CharField(), help_text="MIG profiles.")


class PreviewFeasibilityOutput(FeasibilityOutput):
    line = serializers.CharField(help_text="The picker's line: matching, free now, per node.")


class AlternativePreviewOutput(serializers.Serializer):
    device_class = serializers.CharField()
    generated_selector = serializers.CharField(help_text="The CEL the picker fields make.")
    selector = serializers.CharField(help_text="The claim's whole selector, as create sets it.")
    feasibility = PreviewFeasibilityOutput()
    options = OptionsOutput(help_text="What the devices of the class publish to pick from.")


class PreviewOutput(AlternativePreviewOutput):
    """The first alternative's preview at the top (the only one without `alternatives`)."""

    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    alternatives = AlternativePreviewOutput(
        many=True, help_text="Each alternative's preview, in order (one without alternatives)."
    )
    first_fitting_now = serializers.IntegerField(
        allow_null=True,
        help_text="The position (from 1) of the first alternative that fits now, as the "
        "scheduler tries them; null when none does.",
    )


EXAMPLE_IN = {"cluster": 1, "device_class": "gpu.nvidia.com", "count": 2, "min_memory": "40Gi"}
EXAMPLE_OUT = {
    "cluster": 1,
    "cluster_name": "kubesim",
    "device_class": "gpu.nvidia.com",
    "generated_selector": "device.capacity['gpu.nvidia.com'].memory"
    ".compareTo(quantity('40Gi')) >= 0",
    "selector": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "feasibility": {
        "possible": True,
        "matching": 8,
        "max_on_one_node": 4,
        "free_now_on_one_node": 4,
        "free_now_in_cluster": 6,
        "node": "gpu-node-2",
        "held_outside_portal": 2,
        "tainted": 0,
        "selector_evaluated": True,
        "summary": "Can be satisfied: up to 4 devices of class gpu.nvidia.com matching the "
        "selector on one node. Free now: 4 on gpu-node-2, 6 in the cluster. 2 matching "
        "devices are held outside the portal.",
        "line": "8 devices match, 6 free now, at most 4 on one node",
    },
    "options": {
        "domain": "gpu.nvidia.com",
        "models": ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"],
        "memories": ["81559Mi", "40Gi"],
        "profiles": [],
    },
}


ONE_ALTERNATIVE = ("device_class", "generated_selector", "selector", "feasibility", "options")
EXAMPLE_OUT["alternatives"] = [{key: EXAMPLE_OUT[key] for key in ONE_ALTERNATIVE}]
EXAMPLE_OUT["first_fitting_now"] = 1


class ClaimPreviewApi(ApiView):
    model = ClaimRequest
    pagination_class = None

    @extend_schema(
        tags=TAG,
        request=PreviewInput,
        responses={200: PreviewOutput},
        examples=[
            OpenApiExample("40Gi or more", value=EXAMPLE_IN, request_only=True),
            OpenApiExample("Previewed", value=EXAMPLE_OUT, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        """The picker's CEL, feasibility and options for the fields of a claim; saves nothing."""
        serializer = PreviewInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        cluster = _cluster_of(request, data)
        given = data.pop("alternatives", None)
        if given is None:
            found = [preview(cluster=cluster, **_asked(data))]
        else:
            found = _preview_each(cluster, data["selector"], given)
        first = feasibility.first_fitting([alternative["found"] for alternative in found])
        answer = found[0] | {"alternatives": found, "first_fitting_now": first}
        return Response(PreviewOutput(answer).data)


def _preview_each(
    cluster: Cluster, selector: str, given: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each alternative's preview; the field errors of all of them at once, under their index
    (`{"alternatives": {"1": {"gpu_model": [...]}}}`) as the claim create API answers."""
    found: list[dict[str, Any]] = []
    rows: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for index, alternative in enumerate(given):
        fields = {"selector": selector, **alternative}
        try:
            if not alternative.get("all_devices") and alternative.get("count") is not None:
                COUNT.run_validation(alternative["count"])  # the flat field's rule and words
        except ValidationError as error:
            rows[str(index)] = {"count": error.detail}
            continue
        try:
            found.append(preview(cluster=cluster, **_asked(fields)))
        except ValidationError as error:
            problems = dict(error.detail) if isinstance(error.detail, dict) else {}
            written = problems.pop("selector", None)
            if written is not None:
                rest["selector"] = written
            if problems:
                rows[str(index)] = problems
    if rows:
        rest["alternatives"] = rows
    if rest:
        raise ValidationError(rest)
    return found


def _cluster_of(request: Request, data: dict[str, Any]) -> Cluster:
    if data.get("namespace_request") is not None:
        getter = selectors.namespace_request_get
        pk = data["namespace_request"]
        return visible_or_field_error(getter, request.user, pk, "namespace_request").cluster
    if data.get("cluster") is not None:
        cluster: Cluster = data["cluster"]
        return cluster
    return call_service(cluster_registry.the_only_cluster)


def _asked(data: dict[str, Any]) -> dict[str, Any]:
    count = data.get("count") or 1
    return {
        "device_class": data["device_class"].strip(),
        "count": None if data.get("all_devices") else count,
        "selector": data["selector"].strip(),
        "picks": Picks(*(str(data.get(field) or "").strip() for field in PICKER_FIELDS)),
    }


def preview(
    *, cluster: Cluster, device_class: str, count: int | None, selector: str, picks: Picks
) -> dict[str, Any]:
    """What the claim form's picker shows; a 400 with field errors for what create refuses
    outright (an unknown class, picks the devices do not publish, CEL that does not compile)."""
    offered = device_picker.options(cluster.inventory, device_class)
    _refuse_bad_fields(cluster, device_class, selector, picks, offered)
    generated = device_picker.selector_for(picks, offered.domain)
    whole = device_picker.combined(generated, selector)
    found = feasibility.assess(
        cluster=cluster, device_class=device_class, count=count, selector=whole
    )
    return {
        "cluster": cluster.pk,
        "cluster_name": cluster.name,
        "device_class": device_class,
        "generated_selector": generated,
        "selector": whole,
        "feasibility": found.as_dict() | {"line": found.line()},
        "options": offered,
        "found": found,
    }


def _refuse_bad_fields(
    cluster: Cluster,
    device_class: str,
    selector: str,
    picks: Picks,
    offered: device_picker.Options,
) -> None:
    problems = dict(device_picker.problems(picks, offered))
    unknown = validation.device_class_problem(cluster, device_class)
    if unknown:
        problems["device_class"] = unknown
    written = validation.selector_problem(selector)
    if written:
        problems["selector"] = written
    if problems:
        raise ValidationError({field: [problem] for field, problem in problems.items()})
