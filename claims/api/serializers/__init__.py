"""What the API returns: one output serializer per kind, with the example the schema shows.

Input serializers live next to the view that reads them (claims.api.views), as in the
HackSoftware style guide: they shape input, the services decide what is allowed.
"""

from claims.api.serializers.audit import AuditEventOutput
from claims.api.serializers.clusters import (
    ClusterOutput,
    DeviceClassOutput,
    DeviceOutput,
    MeOutput,
)
from claims.api.serializers.common import ERROR_DETAIL, LOG_TEXT
from claims.api.serializers.requests import (
    ClaimRequestOutput,
    DecidedRequestOutput,
    FeasibilityOutput,
    NamespaceRequestOutput,
    claims_page_context,
)
from claims.api.serializers.runs import PodWarningOutput, RunLogOutput, VerificationRunOutput

__all__ = [
    "ERROR_DETAIL",
    "LOG_TEXT",
    "AuditEventOutput",
    "ClaimRequestOutput",
    "ClusterOutput",
    "DecidedRequestOutput",
    "DeviceClassOutput",
    "DeviceOutput",
    "FeasibilityOutput",
    "MeOutput",
    "NamespaceRequestOutput",
    "PodWarningOutput",
    "RunLogOutput",
    "VerificationRunOutput",
    "claims_page_context",
]
