"""Verification runs (the seed's pod1 on a claim), their logs, and the audit trail."""

from __future__ import annotations

from django.db.models import Prefetch, prefetch_related_objects
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from claims.api import examples
from claims.api.errors import call_service
from claims.api.filters import AuditEventFilter, VerificationRunFilter
from claims.api.idempotency import idempotent
from claims.api.serializers import AuditEventOutput, VerificationRunOutput
from claims.api.views.actions import WAIT_PARAMETERS, ObjectApi, visible_or_field_error
from claims.api.views.base import ApiView
from claims.domain import services
from claims.models import AuditEvent, RunLog, VerificationRun, Workload, WorkloadLog
from claims.read import selectors

TAG = ["runs"]


class RunListApi(ApiView):
    model = VerificationRun
    list_selector = staticmethod(selectors.verification_run_api_rows)
    filterset_class = VerificationRunFilter
    ordering_fields = ["created", "updated", "state", "finished_at"]

    class VerificationRunInput(serializers.Serializer):
        claim = serializers.IntegerField(help_text="Id of the claim to verify.")

    @extend_schema(tags=TAG, responses=VerificationRunOutput(many=True))
    def get(self, request: Request) -> Response:
        """Your verification runs (approvers: everyone's)."""
        return self.list_response(VerificationRunOutput)

    @extend_schema(
        tags=TAG,
        request=VerificationRunInput,
        responses={201: VerificationRunOutput},
        examples=[
            OpenApiExample("Verify claim 7", value={"claim": 7}, request_only=True),
            OpenApiExample(
                "Queued", value=examples.QUEUED_RUN, response_only=True, status_codes=[201]
            ),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Run vectorAdd and deviceQuery on the claim's GPU (the claim must be applied)."""
        serializer = self.VerificationRunInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        claim_id = serializer.validated_data["claim"]
        claim = visible_or_field_error(selectors.claim_request_get, request.user, claim_id, "claim")
        run = call_service(services.verification_run_start, user=request.user, claim_request=claim)
        # The claim as read above (its namespace, cluster and owner are the run's): no re-read.
        run.claim, run.owner = claim, claim.owner
        prefetch_related_objects([run], Prefetch("logs", RunLog.objects.none()))  # new: no log
        return Response(VerificationRunOutput(run).data, status=201)


class RunDetailApi(ObjectApi):
    getter = staticmethod(selectors.verification_run_api_get)
    output = VerificationRunOutput

    @extend_schema(tags=TAG, parameters=WAIT_PARAMETERS, responses=VerificationRunOutput)
    def get(self, request: Request, pk: int) -> Response:
        """One run; `?wait=30&state=running` answers as soon as the state changes."""
        return self.retrieve_after_wait(request)

    @extend_schema(
        tags=TAG,
        responses={200: VerificationRunOutput},
        examples=[OpenApiExample("Cancelled", value=examples.CANCELLED_RUN, response_only=True)],
    )
    def delete(self, request: Request, pk: int) -> Response:
        """Cancel a run still going: it ends failed ("Cancelled by alice.") and its Pod is
        deleted, so DRA frees the GPU; the claim stays. The run's record and logs stay too.
        409 when the run already ended."""
        return self.act(services.verification_run_cancel, "run")


class LogParams(serializers.Serializer):
    since = serializers.IntegerField(required=False, min_value=0, default=0)


# The reads of a log that go on where the last one ended (runs' and workloads' logs).
SINCE = OpenApiParameter(
    "since",
    {"type": "integer", "minimum": 0},
    description="Characters already read (the X-Next-Since of the last answer).",
)


class RunLogApi(ObjectApi):
    @extend_schema(
        tags=TAG,
        parameters=[SINCE],
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                description="The log from `since` on. Headers: X-Next-Since (pass it as "
                "`since` next time), X-Log-Complete (true once the run ended and its logs were "
                "read to the end), X-Log-Unreadable (why the cluster would not give the logs, "
                "while it would not), X-Log-Truncated (true when only the tail is kept).",
                examples=[OpenApiExample("vectorAdd", value=examples.VECTOR_ADD_LOG)],
            )
        },
    )
    def get(self, request: Request, pk: int, container: str) -> HttpResponse:
        """The log of one container (ctr0 vectorAdd, ctr1 deviceQuery) as plain text."""
        if container not in VerificationRun.CONTAINERS:
            raise Http404
        run, log = selectors.verification_run_log_get(user=request.user, pk=pk, container=container)
        params = LogParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        return log_response(run, log, params.validated_data["since"])


def log_response(
    run: VerificationRun | Workload, log: RunLog | WorkloadLog, since: int
) -> HttpResponse:
    # The head of a long log may have been dropped since the client's last read; then the
    # offset points past the end and the client gets what is kept, marked truncated.
    start = since if since <= len(log.text) else 0
    response = HttpResponse(log.text[start:], content_type="text/plain; charset=utf-8")
    response["X-Next-Since"] = str(len(log.text))
    # Complete once the run (or workload) ended and its logs were read to the end: a log the
    # cluster would not give (its kubelet unreachable) is not complete, however final the run;
    # its reason is said, so a script stops waiting for it.
    response["X-Log-Complete"] = "true" if run.is_final and not run.log_error else "false"
    response["X-Log-Truncated"] = "true" if log.truncated else "false"
    if run.log_error:
        response["X-Log-Unreadable"] = _header_text(run.log_error)
    return response


def _header_text(text: str) -> str:
    """One line of ASCII: a header carries no newline, and the cluster's words may."""
    return " ".join(text.encode("ascii", "replace").decode().split())[:500]


class EventListApi(ApiView):
    model = AuditEvent
    list_selector = staticmethod(selectors.audit_event_list)
    filterset_class = AuditEventFilter
    ordering_fields = ["created", "id"]

    @extend_schema(tags=["events"], responses=AuditEventOutput(many=True))
    def get(self, request: Request) -> Response:
        """Every state change of your objects (approvers: of all), oldest first."""
        return self.list_response(AuditEventOutput)
