"""The two kinds of failure callers act on: retry later, or show the cluster's words."""

import json


class KubeError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TransientKubeError(KubeError):
    """The cluster could not be reached or was overloaded: trying again may work."""


class ServerAskedToWait(TransientKubeError):
    """429 (API Priority and Fairness, max-in-flight) or a 5xx with Retry-After: the server did
    not handle the request and says when to send it again."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class ResourceVersionExpired(KubeError):
    """410 Gone: the resourceVersion a watch resumes from is too old; list again."""


class PermanentKubeError(KubeError):
    """The cluster refused the request; `message` is the cluster's own explanation."""

    def __init__(
        self, message: str, status: int = 0, reason: str = "", details: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.details = details or {}

    @property
    def resource_unserved(self) -> bool:
        """A 404 for the path itself (unserved group/version/resource), not a missing object.

        A missing object's Status names it in details.name; an unserved path gets a plain
        "404 page not found" or a Status without a name."""
        return self.status == 404 and not self.details.get("name")

    def __str__(self) -> str:
        return f"{self.message} ({self.status} {self.reason})".strip()


def _status_fields(body: bytes, http_reason: str) -> tuple[str, str, dict]:
    """Message, reason and details from a Kubernetes Status body, or from plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        status = json.loads(text)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        details = status.get("details")
        return (
            str(status.get("message") or http_reason),
            str(status.get("reason") or http_reason),
            details if isinstance(details, dict) else {},
        )
    return text or http_reason, http_reason, {}


def error_for_response(
    status: int, body: bytes, http_reason: str, retry_after: str | None = None
) -> KubeError:
    message, reason, details = _status_fields(body, http_reason)
    if status == 429 or status >= 500:
        seconds = _seconds(retry_after)
        if seconds is not None:
            return ServerAskedToWait(f"{status} {reason}: {message}", seconds)
        return TransientKubeError(f"{status} {reason}: {message}")
    return PermanentKubeError(message, status, reason, details)


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds, as the API server sends it (client-go reads only that form)."""
    try:
        return max(0.0, float(int(retry_after or "")))
    except ValueError:
        return None
