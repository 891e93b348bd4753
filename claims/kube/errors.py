"""The two kinds of failure callers act on: retry later, or show the cluster's words."""

import json


class KubeError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TransientKubeError(KubeError):
    """The cluster could not be reached or was overloaded: trying again may work."""


class PermanentKubeError(KubeError):
    """The cluster refused the request; `message` is the cluster's own explanation."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.message} ({self.status} {self.reason})".strip()


def _status_fields(body: bytes, http_reason: str) -> tuple[str, str]:
    """Message and reason from a Kubernetes Status body, or from plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        status = json.loads(text)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return str(status.get("message") or http_reason), str(status.get("reason") or http_reason)
    return text or http_reason, http_reason


def error_for_response(status: int, body: bytes, http_reason: str) -> KubeError:
    message, reason = _status_fields(body, http_reason)
    if status == 429 or status >= 500:
        return TransientKubeError(f"{status} {reason}: {message}")
    return PermanentKubeError(message, status, reason)
