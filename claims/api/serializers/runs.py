"""What the API shows of verification runs: their Pod, devices, results, warnings and logs."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from claims.api import examples
from claims.api.serializers.common import _example, _text, _time
from claims.api.serializers.requests import QueueOutput
from claims.models import VerificationRun
from claims.policy.verdict import VERDICTS, run_verdict
from claims.read import queue


class RunLogOutput(serializers.Serializer):
    container = serializers.CharField()
    url = serializers.CharField(help_text="The log as text/plain; add ?since=<offset>.")
    length = serializers.IntegerField(help_text="Characters kept so far (the next ?since=).")
    truncated = serializers.BooleanField(help_text="True when only the tail is kept.")


class PodWarningOutput(serializers.Serializer):
    reason = serializers.CharField(help_text="e.g. FailedScheduling, Failed, FailedMount.")
    message = serializers.CharField(help_text="The cluster's words.")
    at = serializers.CharField(help_text="When the cluster last saw it (RFC 3339).")
    count = serializers.IntegerField(help_text="How many times it was seen.")


@extend_schema_serializer(examples=_example("A run that passed", examples.VERIFICATION_RUN))
class VerificationRunOutput(serializers.ModelSerializer):
    claim_name = serializers.CharField(source="claim.name")
    namespace = serializers.CharField(source="claim.namespace_request.name")
    cluster_name = serializers.CharField(source="claim.namespace_request.cluster.name")
    owner = serializers.CharField(source="owner.username")
    devices = serializers.ListField(child=serializers.DictField(child=serializers.JSONField()))
    logs = serializers.SerializerMethodField()
    pod_stage = serializers.ChoiceField(
        choices=[("", "no Pod, or it ended"), *VerificationRun.PodStage.choices],
        help_text="Where the Pod is while the run waits or runs: scheduling (not yet bound), "
        "bound (to `node`; the kubelet said nothing yet), pulling (the image), starting "
        "(image pulled: creating and starting the containers), image_pull_failed "
        "(ErrImagePull or ImagePullBackOff: `state_message` has the cluster's words), "
        'running; "" before the Pod exists and once the run ended.',
    )
    pod_warnings = PodWarningOutput(
        many=True,
        help_text="While the Pod is pending: the latest Warning Events about it, newest first, "
        "as last read from the cluster (every few seconds).",
    )

    verdict = serializers.SerializerMethodField()
    verdict_reason = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()

    class Meta:
        model = VerificationRun
        fields = [
            "id",
            "claim",
            "claim_name",
            "namespace",
            "cluster_name",
            "pod_name",
            "state",
            "state_message",
            "pod_stage",
            "pod_warnings",
            "log_error",
            "owner",
            "node",
            "devices",
            "passed",
            "verdict",
            "verdict_reason",
            "vector_add_passed",
            "device_query_passed",
            "device_name",
            "compute_capability",
            "memory_mib",
            "started_at",
            "finished_at",
            "logs",
            "queue",
            "created",
            "updated",
        ]

    def to_representation(self, instance: VerificationRun) -> dict[str, Any]:
        """DRF's field-by-field walk, built directly (as ClaimRequestOutput): a long-polled
        run is answered many times, and building the fields took most of each answer."""
        run, claim = instance, instance.claim
        ns = claim.namespace_request
        verdict = run_verdict(run)
        return {
            "id": run.pk,
            "claim": run.claim_id,
            "claim_name": claim.name,
            "namespace": ns.name,
            "cluster_name": ns.cluster.name,
            "pod_name": run.pod_name,
            "state": run.state,
            "state_message": run.state_message,
            "pod_stage": "" if run.is_final else run.pod_stage,
            "pod_warnings": [_pod_warning(warning) for warning in run.pod_warnings],
            "log_error": run.log_error,
            "owner": run.owner.username,
            "node": run.node,
            "devices": [{str(k): v for k, v in device.items()} for device in run.devices],
            "passed": run.passed,
            "verdict": verdict.code,
            "verdict_reason": verdict.reason,
            "vector_add_passed": run.vector_add_passed,
            "device_query_passed": run.device_query_passed,
            "device_name": run.device_name,
            "compute_capability": run.compute_capability,
            "memory_mib": None if run.memory_mib is None else int(run.memory_mib),
            "started_at": _time(run.started_at),
            "finished_at": _time(run.finished_at),
            "logs": self.get_logs(run),
            "queue": self.get_queue(run),
            "created": _time(run.created),
            "updated": _time(run.updated),
        }

    @extend_schema_field(
        serializers.ChoiceField(
            choices=VERDICTS,
            help_text="What the run says of its GPU: passed, failed, pending (the samples or "
            "the reading of their logs are not done), or unknown (it never will: "
            "verdict_reason says why, e.g. the log could not be read). `passed` is null for "
            "pending and unknown.",
        )
    )
    def get_verdict(self, run: VerificationRun) -> str:
        return run_verdict(run).code

    @extend_schema_field(
        serializers.CharField(
            help_text="Why the verdict is unknown or still pending, in the cluster's words "
            'where they are the reason; "" otherwise.'
        )
    )
    def get_verdict_reason(self, run: VerificationRun) -> str:
        return run_verdict(run).reason

    @extend_schema_field(QueueOutput(allow_null=True))
    def get_queue(self, run: VerificationRun) -> dict[str, Any] | None:
        """While its Pod waits to be created, its claim's place in the queue."""
        if run.state != VerificationRun.State.QUEUED or not queue.holds_work(run.claim):
            return None
        spot = queue.spot_of(run.claim)
        return QueueOutput(spot.as_dict()).data if spot else None

    @extend_schema_field(RunLogOutput(many=True))
    def get_logs(self, run: VerificationRun) -> list[dict[str, Any]]:
        kept = {log.container: log for log in run.logs.all()}
        return [
            {
                "container": container,
                "url": f"/api/v1/runs/{run.pk}/logs/{container}/",
                "length": _length(kept[container]) if container in kept else 0,
                "truncated": kept[container].truncated if container in kept else False,
            }
            for container in VerificationRun.CONTAINERS
        ]


def _pod_warning(warning: dict[str, Any]) -> dict[str, Any]:
    count = warning["count"]
    return {
        "reason": _text(warning["reason"]),
        "message": _text(warning["message"]),
        "at": _text(warning["at"]),
        "count": None if count is None else int(count),
    }


def _length(log: Any) -> int:
    """The log's length, as the query counted it (selectors.verification_run_api_rows)."""
    counted = getattr(log, "text_length", None)
    return len(log.text) if counted is None else int(counted)
